"""Secrets and personal data in code: API keys, tokens, private keys, passwords, emails.

`code_secrets_v1` counts each kind (`code__n_secrets`, `code__secret_kinds`) and either redacts
the values with placeholders (`<KEY>`, `<PASSWORD>`, `<EMAIL>`, as StarCoder's PII pass does, so
the code stays well-formed) or drops the file with `secret:<kind>`. Patterns are RE2 regexes run
by pyarrow over the whole column; the key formats are the vendors' documented ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import require
from ..registry import register
from ..stage import Mapper, with_columns

# (kind, pattern, replacement); replacements keep the surrounding syntax (quotes, `key =`).
PATTERNS: list[tuple[str, str, str]] = [
    ("private_key", r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |PGP |ENCRYPTED )?PRIVATE KEY(?: BLOCK)?-----"
                    r"[\s\S]*?-----END (?:RSA |EC |DSA |OPENSSH |PGP |ENCRYPTED )?PRIVATE KEY(?: BLOCK)?-----",
     "<PRIVATE_KEY>"),
    ("aws_access_key", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA)[0-9A-Z]{16}\b", "<KEY>"),
    ("aws_secret_key", r"(?i)(aws_?secret_?(?:access_?)?key\S{0,3}\s*[:=]\s*[\"']?)[A-Za-z0-9/+]{40}", r"\1<KEY>"),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b", "<KEY>"),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,72}\b", "<KEY>"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}\b", "<KEY>"),
    ("stripe_key", r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{20,99}\b", "<KEY>"),
    ("openai_key", r"\bsk-(?:proj-)?[A-Za-z0-9_\-]{20,}T3BlbkFJ[A-Za-z0-9_\-]{20,}\b", "<KEY>"),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}", "<KEY>"),
    ("url_credentials", r"([a-z][a-z0-9+.\-]*://[^\s:/@\"']+:)[^\s@/\"']{3,}@", r"\1<PASSWORD>@"),
    ("password", r"(?i)((?:password|passwd|pwd|secret|api_?key|access_?token|auth_?token|client_?secret)"
                 r"[\"']?\s*[:=]\s*[\"'])[^\"'\s]{6,}([\"'])", r"\1<PASSWORD>\2"),
    ("email", r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b", "<EMAIL>"),
]
KINDS = [k for k, _, _ in PATTERNS]


@dataclass(frozen=True, kw_only=True)
class SecretsConfig:
    action: Literal["redact", "drop"] = "redact"
    kinds: list[str] = field(default_factory=lambda: list(KINDS))
    drop_kinds: list[str] = field(default_factory=lambda: [k for k in KINDS if k != "email"])  # action=drop

    def __post_init__(self):
        unknown = sorted(set(self.kinds) - set(KINDS))
        require(not unknown, f"unknown secret kinds {unknown}; known: {KINDS}")


@register
class CodeSecrets(Mapper):
    """Counts secrets per kind; redacts them (default) or drops the file with `secret:<kind>`."""

    name = "code_secrets_v1"
    Config = SecretsConfig

    def transform(self, table: pa.Table):
        cfg = self.config
        text = table.column("text")
        total = np.zeros(table.num_rows, np.int64)
        first_kind = [None] * table.num_rows
        found_kinds: list[list[str]] = [[] for _ in range(table.num_rows)]
        for kind, pattern, replacement in PATTERNS:
            if kind not in cfg.kinds:
                continue
            counts = pc.fill_null(pc.count_substring_regex(text, pattern), 0).to_numpy(zero_copy_only=False)
            if not counts.any():
                continue
            total += counts
            for i in np.flatnonzero(counts):
                found_kinds[i].append(kind)
                if first_kind[i] is None and kind in cfg.drop_kinds:
                    first_kind[i] = kind
            if cfg.action == "redact":  # earlier (more specific) patterns redact first
                text = pc.replace_substring_regex(text, pattern, replacement)
        out = with_columns(table, {
            "text": text,
            "code__n_secrets": pa.array(total, pa.int32()),
            "code__secret_kinds": pa.array([",".join(k) or None for k in found_kinds], pa.string()),
        })
        if cfg.action == "redact":
            return out, None
        return out, pa.array([f"secret:{k}" if k else None for k in first_kind], pa.string())
