"""Secrets and personal data in code (corpus/pii/secrets.py): provider keys, private keys,
credentials assigned to credential-like names, passwords in URLs, emails.

`code_secrets_v2` counts each kind (`code__n_secrets`, `code__secret_kinds`) and either redacts the
values with placeholders (`<KEY>`, `<PASSWORD>`, `<PRIVATE_KEY>`, `<EMAIL>`, as StarCoder's PII
pass does, so the code stays well-formed) or drops the file with `secret:<kind>`. Placeholders
("changeme", "<your-key>", "${VAR}") and test addresses (example.com, *.test) are left alone and
counted (`secret_skipped_placeholder`, `secret_skipped_label`, `email_skipped_test_address`, ...).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

import pyarrow as pa

from manifests.config import require
from ..pii import SECRET_KINDS, find_secrets, redact_secrets
from ..registry import register
from ..stage import Mapper, with_columns

KINDS = list(SECRET_KINDS)


@dataclass(frozen=True, kw_only=True)
class SecretsConfig:
    action: Literal["redact", "drop"] = "redact"
    kinds: list[str] = field(default_factory=lambda: list(KINDS))
    drop_kinds: list[str] = field(default_factory=lambda: [k for k in KINDS if k != "email"])  # action=drop

    def __post_init__(self):
        for key in ("kinds", "drop_kinds"):
            unknown = sorted(set(getattr(self, key)) - set(KINDS))
            require(not unknown, f"{key}: unknown secret kinds {unknown}; known: {KINDS}")


@register
class CodeSecrets(Mapper):
    """Counts secrets per kind; redacts them (default) or drops the file with `secret:<kind>`."""

    name = "code_secrets_v2"
    Config = SecretsConfig

    def transform(self, table: pa.Table):
        cfg = self.config
        kinds = frozenset(cfg.kinds)
        texts, n_secrets, kind_lists, reasons = [], [], [], []
        counters: Counter = Counter()
        for text in table.column("text").to_pylist():
            spans, skipped = find_secrets(text, kinds) if text else ([], Counter())
            counters.update(skipped)
            found = list(dict.fromkeys(s.kind for s in spans))
            counters.update(f"secret_{s.kind}" for s in spans)
            first_drop = next((k for k in found if k in cfg.drop_kinds), None)
            texts.append(redact_secrets(text, spans) if spans and cfg.action == "redact" else text)
            n_secrets.append(len(spans))
            kind_lists.append(",".join(found) or None)
            reasons.append(f"secret:{first_drop}" if first_drop and cfg.action == "drop" else None)
        out = with_columns(table, {
            "text": pa.array(texts, pa.string()),
            "code__n_secrets": pa.array(n_secrets, pa.int32()),
            "code__secret_kinds": pa.array(kind_lists, pa.string()),
        })
        return out, (pa.array(reasons, pa.string()) if cfg.action == "drop" else None), dict(counters)
