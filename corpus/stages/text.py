"""Basic text stages: normalisation, length limits, HTTP response checks. All vectorised."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from manifests.config import require
from ..registry import register
from ..stage import Filter, Mapper, Scorer, evidence


@dataclass(frozen=True, kw_only=True)
class NormalizeTextConfig:
    form: Literal["NFC", "NFKC", "none"] = "NFC"
    strip_control_chars: bool = True  # C0/C1 controls except tab and newline
    collapse_spaces: bool = True  # runs of spaces/tabs -> one space; trailing spaces cut
    max_blank_lines: int = 2  # runs of empty lines are cut to this many
    drop_empty: bool = True  # rows empty after normalising are dropped as `empty_text`

    def __post_init__(self):
        require(self.max_blank_lines >= 0, f"max_blank_lines must be >= 0; got {self.max_blank_lines}")


def normalize_unicode(text: pa.ChunkedArray, form: str) -> pa.ChunkedArray:
    """`pc.utf8_normalize(text, form)`, computed only for the rows not already in `form` by Python's quick check
    (`unicodedata.is_normalized`, about 7x cheaper than normalising, and most text already is; an ASCII string
    is answered at once)."""
    todo = [i for i, v in enumerate(text.to_pylist()) if v is not None and not unicodedata.is_normalized(form, v)]
    if not todo:
        return text
    flat = text.combine_chunks()
    mask = np.zeros(len(flat), dtype=bool)
    mask[todo] = True
    fixed = pc.utf8_normalize(flat.take(pa.array(todo, pa.int64())), form)
    return pa.chunked_array([pc.replace_with_mask(flat, pa.array(mask), fixed)])


@register
class NormalizeText(Mapper):
    """Unicode normalisation and whitespace clean-up of `text`; nulls stay null and drop as empty."""

    name = "normalize_text_v1"
    Config = NormalizeTextConfig

    def transform(self, table: pa.Table):
        cfg = self.config
        text = table.column("text")
        text = pc.replace_substring_regex(text, r"\r\n?", "\n")
        if cfg.strip_control_chars:
            text = pc.replace_substring_regex(text, r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", "")
        if cfg.form != "none":
            text = normalize_unicode(text, cfg.form)
        if cfg.collapse_spaces:
            # = runs of [ \t\x{00a0}] -> " " and " *\n *" -> "\n", matching only what changes (a lone space or
            # newline is left alone instead of being replaced by itself: a third of the cost)
            text = pc.replace_substring_regex(text, r"[ \t\x{00a0}]{2,}|[\t\x{00a0}]", " ")
            text = pc.replace_substring_regex(text, r" +\n *|\n +", "\n")
        blank = "\n" * (cfg.max_blank_lines + 1)
        text = pc.replace_substring_regex(text, r"\n{%d,}" % (cfg.max_blank_lines + 2), blank)
        text = pc.utf8_trim_whitespace(text)
        out = table.set_column(table.schema.get_field_index("text"), "text", text)
        if not cfg.drop_empty:
            return out, None
        empty = pc.fill_null(pc.equal(pc.utf8_length(text), 0), True)
        reasons = pc.if_else(empty, pa.scalar("empty_text"), pa.scalar(None, pa.string()))
        before = pc.utf8_length(table.column("text")).to_pylist()
        found = [{"input_chars": n} if e else None for e, n in zip(empty.to_pylist(), before)]
        return out, (reasons, found)


@dataclass(frozen=True, kw_only=True)
class TextLengthConfig:
    min_chars: int = 0
    max_chars: int | None = None
    min_words: int = 0
    max_words: int | None = None

    def __post_init__(self):
        require(self.min_chars >= 0, f"min_chars must be >= 0; got {self.min_chars}")
        require(self.min_words >= 0, f"min_words must be >= 0; got {self.min_words}")
        require(self.max_chars is None or self.max_chars > self.min_chars,
                f"max_chars must be > min_chars ({self.min_chars}); got {self.max_chars}")
        require(self.max_words is None or self.max_words > self.min_words,
                f"max_words must be > min_words ({self.min_words}); got {self.max_words}")


@register
class TextStats(Scorer):
    """`n_chars` and `n_words` (whitespace-separated) columns."""

    name = "text_stats_v1"

    def score(self, table: pa.Table) -> dict[str, pa.Array]:
        text = table.column("text")
        n_words = pc.list_value_length(pc.utf8_split_whitespace(pc.utf8_trim_whitespace(text)))
        return {"n_chars": pc.utf8_length(text), "n_words": pc.cast(n_words, pa.int32())}


@register
class TextLength(Filter):
    """Drops `too_short` / `too_long` by characters, `too_few_words` / `too_many_words`."""

    name = "text_length_v1"
    Config = TextLengthConfig

    def reasons(self, table: pa.Table) -> pa.Array:
        cfg = self.config
        text = table.column("text")
        n_chars = pc.fill_null(pc.utf8_length(text), 0)
        reasons = pa.nulls(table.num_rows, pa.string())
        checks = [(pc.less(n_chars, cfg.min_chars), "too_short")]
        if cfg.max_chars is not None:
            checks.append((pc.greater(n_chars, cfg.max_chars), "too_long"))
        if cfg.min_words or cfg.max_words is not None:
            n_words = pc.fill_null(pc.list_value_length(pc.utf8_split_whitespace(text)), 0)
            checks.append((pc.less(n_words, cfg.min_words), "too_few_words"))
            if cfg.max_words is not None:
                checks.append((pc.greater(n_words, cfg.max_words), "too_many_words"))
        for mask, reason in reversed(checks):  # the first failing check names the reason
            reasons = pc.if_else(mask, pa.scalar(reason), reasons)
        return reasons

    def details(self, table: pa.Table, dropped: pa.Array) -> list[str | None]:
        """The measured length and the limits: `{"chars": 12, "words": 3, "min_chars": 50, ...}`."""
        cfg = self.config
        text = table.column("text").take(dropped)
        chars = pc.fill_null(pc.utf8_length(text), 0).to_pylist()
        words = pc.fill_null(pc.list_value_length(pc.utf8_split_whitespace(text)), 0).to_pylist()
        limits = {k: v for k, v in (("min_chars", cfg.min_chars), ("max_chars", cfg.max_chars),
                                    ("min_words", cfg.min_words), ("max_words", cfg.max_words)) if v}
        return evidence({"chars": c, "words": w, **limits} for c, w in zip(chars, words))


@dataclass(frozen=True, kw_only=True)
class HttpResponseConfig:
    statuses: list[int] = field(default_factory=lambda: [200])
    content_types: list[str] = field(default_factory=lambda: ["text/html", "application/xhtml+xml"])


@register
class HttpResponse(Filter):
    """For WARC rows: keeps the listed HTTP statuses and MIME types (`bad_status`, `bad_mime`)."""

    name = "http_response_v1"
    Config = HttpResponseConfig

    def reads(self) -> tuple[str, ...]:
        return ("http_status", "content_type")

    def reasons(self, table: pa.Table) -> pa.Array:
        status_ok = pc.fill_null(pc.is_in(table.column("http_status"),
                                          value_set=pa.array(self.config.statuses, pa.int32())), False)
        mime = pc.utf8_trim_whitespace(pc.utf8_lower(
            pc.list_element(pc.split_pattern(pc.fill_null(table.column("content_type"), ""), ";"), 0)))
        mime_ok = pc.is_in(mime, value_set=pa.array(self.config.content_types, pa.string()))
        reasons = pc.if_else(mime_ok, pa.scalar(None, pa.string()), pa.scalar("bad_mime"))
        return pc.if_else(status_ok, reasons, pa.scalar("bad_status"))

    def details(self, table: pa.Table, dropped: pa.Array) -> list[str | None]:
        """The response's status and content type: `{"http_status": 404, "content_type": "text/html"}`."""
        rows = table.select(["http_status", "content_type"]).take(dropped).to_pylist()
        return evidence(rows)
