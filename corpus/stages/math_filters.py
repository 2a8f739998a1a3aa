"""Math tag and symbol filters: `math_signals_v1` scores, `math_filter_v1` decides.

Scores (see corpus/math/signals.py): math__n_tags, math__n_symbols, math__n_latex,
math__symbol_density. The filter keeps a page when its tags and/or symbols pass the thresholds
(`require: any` keeps pages with either signal, as a recall-first first pass over Common Crawl;
`tags`/`symbols`/`both` for stricter passes) and drops the rest as `no_math`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from manifests.errors import ConfigError

from ..config import require
from ..math.signals import math_columns
from ..registry import register
from ..stage import Filter, Scorer

COLUMNS = ["math__n_tags", "math__n_symbols", "math__n_latex", "math__symbol_density"]


@dataclass(frozen=True, kw_only=True)
class SignalsConfig:
    field: str = "text"  # HTML (`content` for WARC rows, string or binary) or extracted text


def _values(table: pa.Table, field: str, stage: str):
    if field not in table.schema.names:
        raise ConfigError(f"{stage}: no column {field!r}; set `field:` (text, html, content)")
    return table.column(field)


@register
class MathSignals(Scorer):
    """Counts math template tags, Unicode math symbols and LaTeX commands per row."""

    name = "math_signals_v1"
    Config = SignalsConfig

    def score(self, table: pa.Table) -> dict[str, pa.Array]:
        return math_columns(_values(table, self.config.field, self.name))

    def counters(self, table: pa.Table, columns: dict[str, pa.Array]) -> dict[str, int]:
        """Totals over the batch (summed over the run in the manifest's stats)."""
        out = {}
        for key, col in (("tags", "math__n_tags"), ("symbols", "math__n_symbols"), ("latex", "math__n_latex")):
            out[key] = int(pc.sum(columns[col]).as_py() or 0)
            out[f"rows_with_{key}"] = int(pc.sum(pc.greater(columns[col], 0)).as_py() or 0)
        return out


@dataclass(frozen=True, kw_only=True)
class MathFilterConfig:
    field: str = "text"  # used only when math_signals_v1 did not run before
    require: Literal["any", "tags", "symbols", "both"] = "any"
    min_tags: int = 1
    min_symbols: int = 3  # Unicode symbols + LaTeX commands
    min_density: float = 0.5  # per 1,000 bytes

    def __post_init__(self):
        require(self.min_tags >= 1, f"min_tags must be >= 1; got {self.min_tags}")
        require(self.min_symbols >= 1, f"min_symbols must be >= 1; got {self.min_symbols}")
        require(self.min_density >= 0, f"min_density must be >= 0; got {self.min_density}")


@register
class MathFilter(Filter):
    """Keeps pages with math tags and/or symbols; drops the rest as `no_math`."""

    name = "math_filter_v1"
    Config = MathFilterConfig

    def reasons(self, table: pa.Table) -> pa.Array:
        cfg = self.config
        if set(COLUMNS).issubset(table.schema.names):
            cols = {c: table.column(c) for c in COLUMNS}
        else:
            cols = math_columns(_values(table, cfg.field, self.name))
        has_tags = pc.greater_equal(cols["math__n_tags"], cfg.min_tags)
        n_sym = pc.add(cols["math__n_symbols"], cols["math__n_latex"])
        has_sym = pc.and_(pc.greater_equal(n_sym, cfg.min_symbols),
                          pc.greater_equal(cols["math__symbol_density"], cfg.min_density))
        keep = {"any": lambda: pc.or_(has_tags, has_sym), "tags": lambda: has_tags,
                "symbols": lambda: has_sym, "both": lambda: pc.and_(has_tags, has_sym)}[cfg.require]()
        return pc.if_else(pc.fill_null(keep, False), pa.scalar(None, pa.string()), pa.scalar("no_math"))
