"""PII in text (web, math, licensed data): emails, phones, IPs, payment cards, US SSNs and IBANs
found by corpus/pii, then per category redacted with a placeholder (`<EMAIL>`), the row dropped
(`pii_<category>`), or only counted.

A drop needs strong evidence: a card or SSN without a card/SSN word near it (or, for cards, the
network's printed grouping) is redacted instead and counted as `pii_<category>_weak_redacted`.
Evidence: `pii__evidence` (JSON per row: start, end, category, rule, action of every value redacted
or dropped on; null when none) and, on dropped rows, the same in `drop_detail`.
Counters: `pii_<category>` = values found; `pii_email_test_address` = documentation addresses
(example.com, *.test) among them, skipped when `skip_test_emails` is set.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

import pyarrow as pa

from manifests.config import require
from ..pii import CATEGORIES, PLACEHOLDERS, find_pii, is_test_email, redact
from ..registry import register
from ..stage import Mapper, with_columns

Action = Literal["redact", "drop", "count", "ignore"]


def _default_actions() -> dict[str, str]:
    return {c: "redact" for c in CATEGORIES}


@dataclass(frozen=True, kw_only=True)
class PiiConfig:
    actions: dict[str, Action] = field(default_factory=_default_actions)  # per category; missing = ignore
    placeholders: dict[str, str] = field(default_factory=lambda: dict(PLACEHOLDERS))
    skip_test_emails: bool = False  # leave example.com / *.test / localhost addresses in place
    add_counts_column: bool = False  # `pii__counts`: a map category -> values found in the row

    def __post_init__(self):
        for c, a in self.actions.items():
            require(c in CATEGORIES, f"actions: unknown category {c!r}; known: {', '.join(CATEGORIES)}")
            require(a in ("redact", "drop", "count", "ignore"),
                    f"actions.{c}: unknown action {a!r}; use redact, drop, count or ignore")
        for c in CATEGORIES:
            require(c in self.placeholders, f"placeholders: missing {c!r}")


@register
class Pii(Mapper):
    """Redacts, drops (`pii_<category>`) or counts emails, phones, IPs, cards, SSNs, IBANs."""

    name = "pii_v3"
    Config = PiiConfig
    detail_column = "pii__evidence"

    def describe(self) -> dict:
        import phonenumbers  # its metadata decides which international numbers are possible

        return {**super().describe(), "phonenumbers": phonenumbers.__version__}

    def transform(self, table: pa.Table):
        cfg = self.config
        active = tuple(c for c in CATEGORIES if cfg.actions.get(c, "ignore") != "ignore")
        new_texts, reasons, per_row, evidence = [], [], [], []
        counters: Counter = Counter()
        for text in table.column("text").to_pylist():
            spans = find_pii(text, active) if text else []
            if "email" in active:
                tests = [s for s in spans if s.category == "email" and is_test_email(text[s.start:s.end])]
                counters["pii_email_test_address"] += len(tests)
                if cfg.skip_test_emails and tests:
                    spans = [s for s in spans if s not in tests]
            found = Counter(s.category for s in spans)
            counters.update({f"pii_{c}": n for c, n in found.items()})
            drop, to_redact = None, []
            for s in spans:
                action = cfg.actions[s.category]
                if action == "drop" and s.strong:
                    drop = drop or s.category
                elif action == "drop":
                    counters[f"pii_{s.category}_weak_redacted"] += 1
                    to_redact.append(s)
                elif action == "redact":
                    to_redact.append(s)
            new_texts.append(redact(text, to_redact, cfg.placeholders) if to_redact and not drop else text)
            acted = [(s, "redact") for s in to_redact] if not drop else \
                [(s, "drop") for s in spans if s.category == drop and s.strong]
            evidence.append(json.dumps([{"start": s.start, "end": s.end, "category": s.category, "rule": s.rule,
                                         "action": a} for s, a in acted]) if acted else None)
            reasons.append(f"pii_{drop}" if drop else None)
            per_row.append(dict(found))
            counters["rows_redacted"] += bool(to_redact and not drop)
        columns = {"text": pa.array(new_texts, pa.string()), "pii__evidence": pa.array(evidence, pa.string())}
        if cfg.add_counts_column:
            columns["pii__counts"] = pa.array([list(d.items()) for d in per_row], pa.map_(pa.string(), pa.int32()))
        return with_columns(table, columns), pa.array(reasons, pa.string()), {k: v for k, v in counters.items() if v}
