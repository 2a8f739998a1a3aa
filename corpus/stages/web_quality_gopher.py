"""Gopher quality and Gopher repetition rules (Rae et al. 2021, table A1), with the same
decisions and reasons as datatrove 0.10.1's `GopherQualityFilter` and `GopherRepetitionFilter`.

Both split words with spaCy like datatrove (corpus/web/words.py, once per text for both filters).
What makes them fast: per-word facts (length, is it all punctuation, has a letter, is it a stop
word) are looked up once per distinct word and summed per document with numpy; n-gram repeats are
counted on hashes (corpus/web/ngrams.py) instead of millions of Python strings. The first failing
check names the reason, in datatrove's order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import chain, repeat

import numpy as np
import pyarrow as pa

from manifests.config import require
from ..registry import register
from ..stage import Filter, decisions
from ..web.ngrams import JoinedWords, duplicated_ngram_chars, later_occurrences, top_ngram_chars
from ..web.punctuation import PUNCTUATION_SET
from ..web.words import SPACY, split_words

STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")


def _texts(table: pa.Table) -> list[str]:
    return [t or "" for t in table.column("text").to_pylist()]


@dataclass(frozen=True, kw_only=True)
class GopherQualityConfig:
    # A None or 0 threshold switches its check off (as in datatrove).
    min_doc_words: int | None = 50
    max_doc_words: int | None = 100000
    min_avg_word_length: float | None = 3
    max_avg_word_length: float | None = 10
    max_symbol_word_ratio: float | None = 0.1
    max_bullet_lines_ratio: float | None = 0.9
    max_ellipsis_lines_ratio: float | None = 0.3
    min_alpha_words_ratio: float | None = 0.8  # datatrove's `max_non_alpha_words_ratio`
    min_stop_words: int | None = 2
    stop_words: list[str] = field(default_factory=lambda: list(STOP_WORDS))

    def __post_init__(self):
        require(self.min_doc_words is None or self.min_doc_words >= 0,
                f"min_doc_words must be >= 0; got {self.min_doc_words}")


class _WordFacts:
    """Per distinct word, once per process: length, has a non-punctuation char, has a letter.

    Words get integer ids (a dict lookup at C speed through `map`); the facts live in numpy arrays
    indexed by id, so a batch's facts are three fancy-indexing operations. Bounded: reset when big.
    """

    def __init__(self):
        self.ids: dict[str, int] = {}
        self.facts = np.zeros((1024, 3), np.int64)

    def lookup(self, words: list[str]) -> np.ndarray:
        """(n_words, 3) facts of `words`, in order."""
        if len(self.ids) > 2_000_000:
            self.__init__()
        new = set(words).difference(self.ids)
        if new:
            start = len(self.ids)
            if start + len(new) > len(self.facts):
                grown = np.zeros((max(2 * len(self.facts), start + len(new)), 3), np.int64)
                grown[:start] = self.facts[:start]
                self.facts = grown
            for i, w in enumerate(new, start):
                self.ids[w] = i
                self.facts[i] = (len(w), any(c not in PUNCTUATION_SET for c in w), any(c.isalpha() for c in w))
        ids = np.fromiter(map(self.ids.__getitem__, words), np.int64, count=len(words))
        return self.facts[ids]


_FACTS = _WordFacts()


@register
class GopherQuality(Filter):
    """Drops `gopher_short_doc`, `gopher_long_doc`, `gopher_below_avg_threshold`,
    `gopher_above_avg_threshold`, `gopher_too_many_hashes`, `gopher_too_many_ellipsis`,
    `gopher_too_many_bullets`, `gopher_too_many_end_ellipsis`, `gopher_below_alpha_threshold`,
    `gopher_enough_stop_words` (datatrove's names)."""

    name = "gopher_quality_v1"
    preload = SPACY  # its words/sentences come from spaCy's rules (corpus/web/words.py)
    Config = GopherQualityConfig

    def reasons(self, table: pa.Table) -> pa.Array:
        cfg = self.config
        texts = _texts(table)
        words = split_words(texts)
        n_docs = len(texts)
        n_words = np.fromiter(map(len, words), np.int64, count=n_docs)
        doc_of = np.repeat(np.arange(n_docs), n_words)
        flat = list(chain.from_iterable(words))
        facts = _FACTS.lookup(flat)
        lengths, non_symbol, alpha = facts[:, 0], facts[:, 1], facts[:, 2]
        n_non_symbol = np.bincount(doc_of, weights=non_symbol, minlength=n_docs)
        chars_non_symbol = np.bincount(doc_of, weights=lengths * non_symbol, minlength=n_docs)
        n_alpha = np.bincount(doc_of, weights=alpha, minlength=n_docs)
        stop_index = {w: i for i, w in enumerate(sorted(set(cfg.stop_words)))}
        stop_of = np.fromiter(map(stop_index.get, flat, repeat(-1)), np.int64, count=len(flat))
        is_stop = stop_of >= 0
        present = np.unique(doc_of[is_stop] * len(stop_index) + stop_of[is_stop])
        n_stop = np.bincount(present // max(len(stop_index), 1), minlength=n_docs)

        failures = [self._first_failure(cfg, text, int(n_words[d]), int(n_non_symbol[d]),
                                        float(chars_non_symbol[d]), int(n_alpha[d]), int(n_stop[d]))
                    for d, text in enumerate(texts)]
        return decisions(failures)

    @staticmethod
    def _first_failure(cfg, text, n_words, n_non_symbol, chars_non_symbol, n_alpha, n_stop):
        """(reason, evidence) of the first rule the page fails, in datatrove's order; None if it passes."""
        if cfg.min_doc_words and n_non_symbol < cfg.min_doc_words:
            return "gopher_short_doc", {"words": n_non_symbol, "min": cfg.min_doc_words}
        if cfg.max_doc_words and n_non_symbol > cfg.max_doc_words:
            return "gopher_long_doc", {"words": n_non_symbol, "max": cfg.max_doc_words}
        avg = chars_non_symbol / n_non_symbol if n_non_symbol else float("nan")
        if cfg.min_avg_word_length and avg < cfg.min_avg_word_length:
            return "gopher_below_avg_threshold", {"avg_word_length": avg, "min": cfg.min_avg_word_length}
        if cfg.max_avg_word_length and avg > cfg.max_avg_word_length:
            return "gopher_above_avg_threshold", {"avg_word_length": avg, "max": cfg.max_avg_word_length}
        if cfg.max_symbol_word_ratio and text.count("#") / n_words > cfg.max_symbol_word_ratio:
            return "gopher_too_many_hashes", {"hashes": text.count("#"), "words": n_words,
                                              "max_ratio": cfg.max_symbol_word_ratio}
        ellipses = text.count("...") + text.count("…")
        if cfg.max_symbol_word_ratio and ellipses / n_words > cfg.max_symbol_word_ratio:
            return "gopher_too_many_ellipsis", {"ellipses": ellipses, "words": n_words,
                                                "max_ratio": cfg.max_symbol_word_ratio}
        if cfg.max_bullet_lines_ratio or cfg.max_ellipsis_lines_ratio:
            lines = text.splitlines()
            if cfg.max_bullet_lines_ratio:
                bullets = sum(1 for s in lines if s.lstrip().startswith(("•", "-")))
                if bullets / len(lines) > cfg.max_bullet_lines_ratio:
                    return "gopher_too_many_bullets", {"bullet_lines": bullets, "lines": len(lines),
                                                       "max_ratio": cfg.max_bullet_lines_ratio}
            if cfg.max_ellipsis_lines_ratio:
                ends = sum(1 for s in lines if s.rstrip().endswith(("...", "…")))
                if ends / len(lines) > cfg.max_ellipsis_lines_ratio:
                    return "gopher_too_many_end_ellipsis", {"ellipsis_lines": ends, "lines": len(lines),
                                                            "max_ratio": cfg.max_ellipsis_lines_ratio}
        if cfg.min_alpha_words_ratio and n_alpha / n_words < cfg.min_alpha_words_ratio:
            return "gopher_below_alpha_threshold", {"alpha_words": n_alpha, "words": n_words,
                                                    "min_ratio": cfg.min_alpha_words_ratio}
        if cfg.min_stop_words and n_stop < cfg.min_stop_words:
            return "gopher_enough_stop_words", {"stop_words": n_stop, "min": cfg.min_stop_words}
        return None


def _default_top():
    return [[2, 0.2], [3, 0.18], [4, 0.16]]


def _default_dup():
    return [[5, 0.15], [6, 0.14], [7, 0.13], [8, 0.12], [9, 0.11], [10, 0.10]]


@dataclass(frozen=True, kw_only=True)
class GopherRepetitionConfig:
    dup_line_frac: float | None = 0.3
    dup_para_frac: float | None = 0.3
    dup_line_char_frac: float | None = 0.2
    dup_para_char_frac: float | None = 0.2
    top_n_grams: list[list[float]] = field(default_factory=_default_top)  # [n, max char fraction]
    dup_n_grams: list[list[float]] = field(default_factory=_default_dup)

    def __post_init__(self):
        for key in ("top_n_grams", "dup_n_grams"):
            for pair in getattr(self, key):
                require(len(pair) == 2 and int(pair[0]) == pair[0] and pair[0] >= 1,
                        f"{key} entries are [n, fraction] with integer n >= 1; got {pair}")


def _duplicates(items: list[str]) -> tuple[int, int]:
    """(repeated elements, their characters), counting every occurrence after the first."""
    seen: set[str] = set()
    n = chars = 0
    for item in items:
        if item in seen:
            n += 1
            chars += len(item)
        else:
            seen.add(item)
    return n, chars


_PARAGRAPHS = re.compile(r"\n{2,}")
_LINES = re.compile("\n+")


@register
class GopherRepetition(Filter):
    """Drops `empty`, `dup_para_frac`, `dup_para_char_frac`, `dup_line_frac`, `dup_line_char_frac`,
    `top_{n}_gram`, `duplicated_{n}_n_grams` (datatrove's names)."""

    name = "gopher_repetition_v1"
    preload = SPACY  # its words/sentences come from spaCy's rules (corpus/web/words.py)
    Config = GopherRepetitionConfig

    def reasons(self, table: pa.Table):
        texts = _texts(table)
        out: list[tuple | None] = [None] * len(texts)
        need_words = []
        for i, text in enumerate(texts):
            out[i] = self._line_checks(text)
            if out[i] is None:
                need_words.append(i)
        words = split_words([texts[i] for i in need_words])
        for i, ws in zip(need_words, words):
            out[i] = self._ngram_checks(texts[i], ws)
        return decisions(out)

    def _line_checks(self, text: str) -> tuple | None:
        cfg = self.config
        if not text:
            return "empty", {"chars": 0}
        paragraphs = _PARAGRAPHS.split(text.strip())
        n_dup, dup_chars = _duplicates(paragraphs)
        if cfg.dup_para_frac and n_dup / len(paragraphs) > cfg.dup_para_frac:
            return "dup_para_frac", {"repeated": n_dup, "paragraphs": len(paragraphs), "max_ratio": cfg.dup_para_frac}
        if cfg.dup_para_char_frac and dup_chars / len(text) > cfg.dup_para_char_frac:
            return "dup_para_char_frac", {"repeated_chars": dup_chars, "chars": len(text),
                                          "max_ratio": cfg.dup_para_char_frac}
        lines = _LINES.split(text)
        n_dup, dup_chars = _duplicates(lines)
        if cfg.dup_line_frac and n_dup / len(lines) > cfg.dup_line_frac:
            return "dup_line_frac", {"repeated": n_dup, "lines": len(lines), "max_ratio": cfg.dup_line_frac}
        if cfg.dup_line_char_frac and dup_chars / len(text) > cfg.dup_line_char_frac:
            return "dup_line_char_frac", {"repeated_chars": dup_chars, "chars": len(text),
                                          "max_ratio": cfg.dup_line_char_frac}
        return None

    def _ngram_checks(self, text: str, words: list[str]) -> tuple | None:
        cfg = self.config
        n_chars = len(text)
        word_lengths = np.fromiter(map(len, words), np.int64, count=len(words))
        spaced = JoinedWords(words, " ", word_lengths)
        for n, frac in cfg.top_n_grams:
            hashes, lengths = spaced.ngrams(int(n))
            if len(hashes) and (top := top_ngram_chars(hashes, lengths)) / n_chars > frac:
                return f"top_{int(n)}_gram", {"ngram_chars": int(top), "chars": n_chars, "max_ratio": frac}
        glued = JoinedWords(words, "", word_lengths)
        # Every repeat the scan below counts for n starts where the shortest checked gram occurred before
        # (ngrams.later_occurrences), so the characters of the n-grams there bound its count: where even
        # that bound is within the limit, the check passes without the scan (most pages, most n).
        shortest = min((int(n) for n, _ in cfg.dup_n_grams), default=0)
        later = later_occurrences(glued.ngrams(shortest)[0]) if shortest else None
        for n, frac in cfg.dup_n_grams:
            if glued.span_chars(later, int(n)) / n_chars <= frac:
                continue
            hashes, lengths = glued.ngrams(int(n))
            if (dup := duplicated_ngram_chars(hashes, lengths, int(n))) / n_chars > frac:
                return f"duplicated_{int(n)}_n_grams", {"duplicated_chars": int(dup), "chars": n_chars,
                                                        "max_ratio": frac}
        return None
