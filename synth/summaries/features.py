"""Lexical consistency features of a (document, summary) pair, for the entailment scorer.

No NLI model works offline here, so the scorer is a small logistic regression over features that
track what unfaithful summaries do: bring in words, names and numbers the document does not have,
and string together phrases the document never says. All features are in [0, 1] or a log length.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

import numpy as np

_STOP = frozenset("""a an the and or but if of to in on at by for with from as is are was were be been being it its
this that these those he she they them his her their we our you your i me my not no so than then there here
has have had do does did will would can could should may might must also into over after before about up down
out more most very just said says say who whom which what when where why how all any some such""".split())

FEATURE_NAMES = ["content_unigram_cov", "bigram_cov", "trigram_cov", "number_cov", "entity_cov",
                 "novel_content_frac_sent_max", "bigram_cov_sent_min", "trigram_cov_sent_min",
                 "longest_copied_frac", "log_novel_content", "log_novel_numbers", "log_novel_entities",
                 "log_summary_words"]


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())


def _cov(items: list, ref: set) -> float:
    return sum(1 for x in items if x in ref) / len(items) if items else 1.0


def _ngrams(tokens: list[str], n: int) -> list[tuple]:
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def _numbers(text: str) -> list[str]:
    return [n.replace(",", "") for n in re.findall(r"\d[\d,]*(?:\.\d+)?", text)]


def _entities(text: str) -> list[str]:
    # Capitalised words not at a sentence start; lower-cased datasets (polytope, xsum) give few, so
    # the feature is 1.0 there and the n-gram features carry the signal.
    out = []
    for sent in re.split(r"(?<=[.!?])\s+", text):
        words = sent.split()
        out += [w.strip(".,;:'\"()").lower() for w in words[1:] if w[:1].isupper() and w.strip(".,;:'\"()").isalpha()]
    return out


def _longest_copied(s_tok: list[str], d_grams: dict[int, set]) -> int:
    """Longest run of summary tokens found verbatim in the document (capped at 12)."""
    best = 0
    for n in range(1, 13):
        if n not in d_grams or not any(g in d_grams[n] for g in _ngrams(s_tok, n)):
            break
        best = n
    return best


@lru_cache(maxsize=256)
def _document_index(document: str) -> tuple[set, dict[int, set], set, set]:
    """A document's n-gram sets, computed once: SummaC pairs several summaries with one document."""
    d_tok = _tokens(document)
    d_grams = {n: set(_ngrams(d_tok, n)) for n in range(1, 13)}
    d_ents = set(w.lower() for w in re.findall(r"[A-Za-z]+", document))
    return set(d_tok), d_grams, set(_numbers(document)), d_ents


def pair_features(document: str, summary: str) -> list[float]:
    s_tok = _tokens(summary)
    d_set, d_grams, d_nums, d_ents = _document_index(document)
    content = [t for t in s_tok if t not in _STOP]
    sent_novel, sent_bi, sent_tri = [], [], []
    for sent in re.split(r"(?<=[.!?])\s+|\n+", summary):
        toks = _tokens(sent)
        c = [t for t in toks if t not in _STOP]
        if c:
            sent_novel.append(1.0 - _cov(c, d_set))
        if len(toks) >= 3:
            sent_bi.append(_cov(_ngrams(toks, 2), d_grams[2]))
            sent_tri.append(_cov(_ngrams(toks, 3), d_grams[3]))
    nums, ents = _numbers(summary), _entities(summary)
    return [
        _cov(content, d_set),
        _cov(_ngrams(s_tok, 2), d_grams[2]),
        _cov(_ngrams(s_tok, 3), d_grams[3]),
        _cov(nums, d_nums),
        _cov(ents, d_ents),
        max(sent_novel, default=0.0),
        min(sent_bi, default=1.0),
        min(sent_tri, default=1.0),
        _longest_copied(s_tok, d_grams) / 12.0,
        math.log1p(sum(1 for t in content if t not in d_set)),
        math.log1p(sum(1 for n in nums if n not in d_nums)),
        math.log1p(sum(1 for e in ents if e not in d_ents)),
        math.log1p(len(s_tok)),
    ]


def feature_matrix(documents: list[str], summaries: list[str]) -> np.ndarray:
    return np.array([pair_features(d, s) for d, s in zip(documents, summaries)], dtype=np.float64)
