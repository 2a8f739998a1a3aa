"""FineWeb's extra quality rules (Penedo et al. 2024), with the same decisions and reasons as
datatrove 0.10.1's `FineWebQualityFilter`: `empty`, `line_punct_ratio`, `short_line_ratio`,
`char_dup_ratio`, `list_ratio`.

Only the last rule needs words (newlines per word); words are counted with spaCy like datatrove,
but only for pages where it can matter: spaCy splits at every whitespace character, so it never
finds fewer words than `str.split()`; a page whose newlines per whitespace-split word is already
within the limit passes without tokenizing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyarrow as pa

from ..registry import register
from ..stage import Filter, decisions
from ..web.punctuation import TERMINAL_PUNCTUATION
from ..web.words import SPACY, split_words

# Whitespace for str.split() that spaCy may not split at: such pages are always tokenized.
_ODD_SPACE = re.compile("[\x1c-\x1f\x85]")


@dataclass(frozen=True, kw_only=True)
class FineWebQualityConfig:
    line_punct_thr: float = 0.12  # min share of lines ending in terminal punctuation
    line_punct_exclude_zero: bool = False  # a page with no such line at all is kept when true
    stop_chars: list[str] = field(default_factory=lambda: sorted(TERMINAL_PUNCTUATION))
    short_line_thr: float = 0.67  # max share of lines of <= short_line_length characters
    short_line_length: int = 30
    char_duplicates_ratio: float = 0.01  # max share of characters in repeated lines
    new_line_ratio: float = 0.3  # max newlines per word


@register
class FineWebQuality(Filter):
    """Drops `empty`, `line_punct_ratio`, `short_line_ratio`, `char_dup_ratio`, `list_ratio`."""

    name = "fineweb_quality_v1"
    preload = SPACY  # its words/sentences come from spaCy's rules (corpus/web/words.py)
    Config = FineWebQualityConfig

    def reasons(self, table: pa.Table):
        cfg = self.config
        stop_chars = tuple(cfg.stop_chars)
        texts = [t or "" for t in table.column("text").to_pylist()]
        out: list[tuple | None] = [None] * len(texts)
        need_words = []
        for i, text in enumerate(texts):
            lines = [line for line in text.split("\n") if line.strip() != ""]
            if not lines:
                out[i] = "empty", {"lines": 0}
                continue
            ended = sum(1 for line in lines if line.endswith(stop_chars))
            if ended / len(lines) < cfg.line_punct_thr and not (ended == 0 and cfg.line_punct_exclude_zero):
                out[i] = "line_punct_ratio", {"punct_lines": ended, "lines": len(lines), "min_ratio": cfg.line_punct_thr}
                continue
            short = sum(1 for line in lines if len(line) <= cfg.short_line_length)
            if short / len(lines) > cfg.short_line_thr:
                out[i] = "short_line_ratio", {"short_lines": short, "lines": len(lines), "max_ratio": cfg.short_line_thr}
                continue
            seen, dup_chars = set(), 0
            for line in lines:
                if line in seen:
                    dup_chars += len(line)
                else:
                    seen.add(line)
            chars = len(text.replace("\n", ""))
            if dup_chars / chars > cfg.char_duplicates_ratio:
                out[i] = "char_dup_ratio", {"repeated_chars": dup_chars, "chars": chars,
                                            "max_ratio": cfg.char_duplicates_ratio}
                continue
            n_newlines = text.count("\n")
            if n_newlines and (_ODD_SPACE.search(text) or n_newlines / len(text.split()) > cfg.new_line_ratio):
                need_words.append(i)
        for i, words in zip(need_words, split_words([texts[i] for i in need_words])):
            if (newlines := texts[i].count("\n")) / len(words) > cfg.new_line_ratio:
                out[i] = "list_ratio", {"newlines": newlines, "words": len(words), "max_ratio": cfg.new_line_ratio}
        return decisions(out)
