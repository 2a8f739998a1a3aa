"""PII: find emails, phone numbers, IP addresses, payment cards (Luhn), US SSNs and IBANs (mod 97)
in `text` (corpus/web/pii.py) and, per category, redact them with a placeholder (`<EMAIL>`), drop
the row (`pii_<category>`), or only count them. Counters: `pii_<category>` = values found.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

import pyarrow as pa

from ..config import require
from ..registry import register
from ..stage import Mapper, with_columns
from ..web.pii import CATEGORIES, PLACEHOLDERS, find_pii, redact

Action = Literal["redact", "drop", "count", "ignore"]


def _default_actions() -> dict[str, str]:
    return {c: "redact" for c in CATEGORIES}


@dataclass(frozen=True, kw_only=True)
class WebPiiConfig:
    actions: dict[str, Action] = field(default_factory=_default_actions)  # per category; missing = ignore
    placeholders: dict[str, str] = field(default_factory=lambda: dict(PLACEHOLDERS))
    add_counts_column: bool = False  # `pii__counts`: a map category -> values found in the row

    def __post_init__(self):
        for c in self.actions:
            require(c in CATEGORIES, f"actions: unknown category {c!r}; known: {', '.join(CATEGORIES)}")
        for c in CATEGORIES:
            require(c in self.placeholders, f"placeholders: missing {c!r}")


@register
class WebPii(Mapper):
    """Redacts, drops (`pii_<category>`) or counts emails, phones, IPs, cards, SSNs, IBANs."""

    name = "web_pii_v1"
    Config = WebPiiConfig

    def transform(self, table: pa.Table):
        cfg = self.config
        active = tuple(c for c in CATEGORIES if cfg.actions.get(c, "ignore") != "ignore")
        texts = table.column("text").to_pylist()
        new_texts, reasons, per_row = [], [], []
        counters: Counter = Counter()
        for text in texts:
            spans = find_pii(text, active) if text else []
            found = Counter(s.category for s in spans)
            counters.update({f"pii_{c}": n for c, n in found.items()})
            drop = next((c for c in active if found[c] and cfg.actions[c] == "drop"), None)
            to_redact = [s for s in spans if cfg.actions[s.category] == "redact"]
            new_texts.append(redact(text, to_redact, cfg.placeholders) if to_redact else text)
            reasons.append(f"pii_{drop}" if drop else None)
            per_row.append(dict(found))
            if to_redact:
                counters["rows_redacted"] += 1
        columns = {"text": pa.array(new_texts, pa.string())}
        if cfg.add_counts_column:
            columns["pii__counts"] = pa.array([list(d.items()) for d in per_row], pa.map_(pa.string(), pa.int32()))
        return with_columns(table, columns), pa.array(reasons, pa.string()), dict(counters)
