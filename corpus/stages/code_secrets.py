"""Secrets and personal data in code (corpus/pii/secrets.py): provider keys, private keys, nkey seeds,
JWK private members, URL passwords (rules); values the credential model scores at or above its
shipped threshold (passwords in configs and fixtures, tokens, nonces, salts, app secrets, auth
headers); emails.

`code_secrets_v3` counts each kind (`code__n_secrets`, `code__secret_kinds`), records the evidence of
every span in `code__secret_evidence` (JSON: start, end, kind, rule or model score, name, binding;
never the value), and either redacts the values with placeholders (`<KEY>`, `<PASSWORD>`,
`<PRIVATE_KEY>`, `<EMAIL>`, as StarCoder's PII pass does, so the code stays well-formed) or drops the
file with `secret:<kind>` and the same evidence in `drop_detail`. The model reads the file's extension
from the `path` column when there is one. Placeholders ("changeme", "<your-key>", "${VAR}") and test
addresses are left alone and counted (`secret_skipped_placeholder`, `email_skipped_test_address`, ...).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

import pyarrow as pa

from manifests.config import require
from ..pii import SECRET_KINDS, find_secrets, redact_secrets
from ..pii.secret_model import MODEL_PATH
from ..registry import register
from ..stage import Mapper, with_columns

KINDS = list(SECRET_KINDS)
# bare UUIDs (no credential name) are CredData credentials but mostly identifiers in code: off by default
DEFAULT_KINDS = [k for k in KINDS if k != "uuid"]


@dataclass(frozen=True, kw_only=True)
class SecretsConfig:
    action: Literal["redact", "drop"] = "redact"
    kinds: list[str] = field(default_factory=lambda: list(DEFAULT_KINDS))
    drop_kinds: list[str] = field(default_factory=lambda: [k for k in KINDS if k != "email"])  # action=drop

    def __post_init__(self):
        for key in ("kinds", "drop_kinds"):
            unknown = sorted(set(getattr(self, key)) - set(KINDS))
            require(not unknown, f"{key}: unknown secret kinds {unknown}; known: {KINDS}")


def evidence_json(spans) -> str | None:
    if not spans:
        return None
    return json.dumps([{"start": s.start, "end": s.end, "kind": s.kind, "evidence": s.evidence} for s in spans],
                      ensure_ascii=False)


@register
class CodeSecrets(Mapper):
    """Counts secrets per kind with their evidence; redacts them (default) or drops the file with `secret:<kind>`."""

    name = "code_secrets_v3"
    Config = SecretsConfig
    detail_column = "code__secret_evidence"

    def resources(self) -> dict:
        return {"credential_model": MODEL_PATH}

    def transform(self, table: pa.Table):
        cfg = self.config
        kinds = frozenset(cfg.kinds)
        paths = table.column("path").to_pylist() if "path" in table.schema.names else [None] * table.num_rows
        texts, n_secrets, kind_lists, reasons, evidence = [], [], [], [], []
        counters: Counter = Counter()
        for text, path in zip(table.column("text").to_pylist(), paths):
            ext = os.path.splitext(path or "")[1]
            spans, skipped = find_secrets(text, kinds, ext) if text else ([], Counter())
            counters.update(skipped)
            found = list(dict.fromkeys(s.kind for s in spans))
            counters.update(f"secret_{s.kind}" for s in spans)
            first_drop = next((k for k in found if k in cfg.drop_kinds), None)
            texts.append(redact_secrets(text, spans) if spans and cfg.action == "redact" else text)
            n_secrets.append(len(spans))
            kind_lists.append(",".join(found) or None)
            evidence.append(evidence_json(spans))
            reasons.append(f"secret:{first_drop}" if first_drop and cfg.action == "drop" else None)
        out = with_columns(table, {
            "text": pa.array(texts, pa.string()),
            "code__n_secrets": pa.array(n_secrets, pa.int32()),
            "code__secret_kinds": pa.array(kind_lists, pa.string()),
            "code__secret_evidence": pa.array(evidence, pa.string()),
        })
        return out, (pa.array(reasons, pa.string()) if cfg.action == "drop" else None), dict(counters)
