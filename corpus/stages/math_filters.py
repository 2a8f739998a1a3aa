"""Math tag and symbol filters: `math_signals_v1` scores, `math_filter_v1` decides.

Scores: math__n_tags (formulas a reader sees: rendered-math elements and delimited TeX in visible
text, corpus/math/visible.py; never scripts, comments or site-wide MathJax/KaTeX loaders),
math__n_symbols, math__n_latex and math__symbol_density (per 1,000 characters of the page *text*,
corpus/math/signals.py) and math__tag_density (visible formulas per 1,000 characters of page text). HTML given as bytes is decoded by corpus/web/charset.py (BOM, HTTP header
from `content_type`, `<meta>`, detection), the web pipeline's one decoding path. The filter keeps a page when its tags and/or symbols pass the thresholds
(tags: at least `min_tags` formulas and, with `min_tag_density`, at least that many per 1,000 characters
of page text, so one stray formula on a long page of code or prose is not a math signal;
`require: any` keeps pages with either signal, as a recall-first first pass over Common Crawl;
`tags`/`symbols`/`both` for stricter passes) and drops the rest as `no_math`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from manifests.errors import ConfigError

from manifests.config import require
from ..math.html_math import count_fallbacks, decode_markup
from ..math.signals import text_columns
from ..math.visible import count_delimited, visible_math
from ..registry import register
from ..stage import Filter, Scorer, StageResult

COLUMNS = ["math__n_tags", "math__n_symbols", "math__n_latex", "math__symbol_density", "math__tag_density"]


class CountsMathFallbacks:
    """Mixin for stages that read HTML math: the batch runs inside html_math.count_fallbacks(), and each
    fallback (MathML the stylesheet cannot take, kept as its text) is counted in the stage's counters."""

    def apply(self, table: pa.Table) -> StageResult:
        with count_fallbacks() as counts:
            result = super().apply(table)
        for key, n in counts.items():
            result.stats.counters[key] = result.stats.counters.get(key, 0) + n
        return result


@dataclass(frozen=True, kw_only=True)
class SignalsConfig:
    field: str = "text"  # the HTML (`content` for WARC rows, string or binary) or, with markup: text, page text
    markup: Literal["html", "text"] = "html"
    content_type_field: str = "content_type"  # HTTP Content-Type (its charset) for binary HTML, when present


def signal_columns(table: pa.Table, cfg: SignalsConfig, stage: str) -> dict[str, pa.Array]:
    if cfg.field not in table.schema.names:
        raise ConfigError(f"{stage}: no column {cfg.field!r}; set `field:` (text, html, content)")
    values = table.column(cfg.field).to_pylist()
    if cfg.markup == "text":
        texts = [decode_markup(v) for v in values]
        n_tags = [count_delimited(t) for t in texts]
    else:
        types = (table.column(cfg.content_type_field).to_pylist() if cfg.content_type_field in table.schema.names
                 else [None] * len(values))
        seen = [visible_math(decode_markup(v, ct)) for v, ct in zip(values, types)]
        n_tags, texts = [s.n_tags for s in seen], [s.text for s in seen]
    return {"math__n_tags": pa.array(n_tags, pa.int32()), **text_columns(texts, n_tags)}


@register
class MathSignals(CountsMathFallbacks, Scorer):
    """Counts math template tags, Unicode math symbols and LaTeX commands per row."""

    name = "math_signals_v1"
    Config = SignalsConfig

    def resources(self) -> dict:
        from ..math import html_math, signals

        return {"latex_words": signals.DATA / "latex_words", "unicode_math": signals.DATA / "unicode_math",
                "mmltex": html_math.MMLTEX.parent}

    def score(self, table: pa.Table) -> dict[str, pa.Array]:
        return signal_columns(table, self.config, self.name)

    def counters(self, table: pa.Table, columns: dict[str, pa.Array]) -> dict[str, int]:
        """Totals over the batch (summed over the run in the manifest's stats)."""
        out = {}
        for key, col in (("tags", "math__n_tags"), ("symbols", "math__n_symbols"), ("latex", "math__n_latex")):
            out[key] = int(pc.sum(columns[col]).as_py() or 0)
            out[f"rows_with_{key}"] = int(pc.sum(pc.greater(columns[col], 0)).as_py() or 0)
        return out


@dataclass(frozen=True, kw_only=True)
class MathFilterConfig:
    field: str = "text"  # used only when math_signals_v1 did not run before (then scored as HTML)
    require: Literal["any", "tags", "symbols", "both"] = "any"
    min_tags: int = 1
    min_tag_density: float = 0.0  # visible formulas per 1,000 characters of page text (0: any count of min_tags)
    min_symbols: int = 3  # Unicode symbols + LaTeX commands
    min_density: float = 0.5  # per 1,000 characters of page text

    def __post_init__(self):
        require(self.min_tags >= 1, f"min_tags must be >= 1; got {self.min_tags}")
        require(self.min_tag_density >= 0, f"min_tag_density must be >= 0; got {self.min_tag_density}")
        require(self.min_symbols >= 1, f"min_symbols must be >= 1; got {self.min_symbols}")
        require(self.min_density >= 0, f"min_density must be >= 0; got {self.min_density}")


@register
class MathFilter(CountsMathFallbacks, Filter):
    """Keeps pages with math tags and/or symbols; drops the rest as `no_math`."""

    name = "math_filter_v1"
    Config = MathFilterConfig

    def reasons(self, table: pa.Table) -> pa.Array:
        cfg = self.config
        if set(COLUMNS).issubset(table.schema.names):
            cols = {c: table.column(c) for c in COLUMNS}
        else:
            cols = signal_columns(table, SignalsConfig(field=cfg.field), self.name)
        has_tags = pc.greater_equal(cols["math__n_tags"], cfg.min_tags)
        if cfg.min_tag_density > 0:
            has_tags = pc.and_(has_tags, pc.greater_equal(cols["math__tag_density"], cfg.min_tag_density))
        n_sym = pc.add(cols["math__n_symbols"], cols["math__n_latex"])
        has_sym = pc.and_(pc.greater_equal(n_sym, cfg.min_symbols),
                          pc.greater_equal(cols["math__symbol_density"], cfg.min_density))
        keep = {"any": lambda: pc.or_(has_tags, has_sym), "tags": lambda: has_tags,
                "symbols": lambda: has_sym, "both": lambda: pc.and_(has_tags, has_sym)}[cfg.require]()
        reasons = pc.if_else(pc.fill_null(keep, False), pa.scalar(None, pa.string()), pa.scalar("no_math"))
        dropped = pc.indices_nonzero(pc.is_valid(reasons))
        found: list[dict | None] = [None] * table.num_rows
        picked = {k: cols[k].take(dropped).to_pylist() for k in
                  ("math__n_tags", "math__tag_density", "math__n_symbols", "math__n_latex", "math__symbol_density")}
        for j, i in enumerate(dropped.to_pylist()):  # what was counted, against the limits of `require`
            found[i] = {"tags": picked["math__n_tags"][j], "tag_density": picked["math__tag_density"][j],
                        "symbols": (picked["math__n_symbols"][j] or 0) + (picked["math__n_latex"][j] or 0),
                        "symbol_density": picked["math__symbol_density"][j], "require": cfg.require,
                        "min_tags": cfg.min_tags, "min_symbols": cfg.min_symbols}
        return reasons, found
