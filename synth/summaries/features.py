"""Support features of a (document, summary) pair, for the entailment scorer.

No NLI model works offline here, so consistency is measured as *support*: how much of the summary the
document backs. Each feature is a ratio in [0, 1], larger meaning better supported; none is a length
or a raw count (those told SummaC's subsets apart by their base rates instead of measuring
faithfulness, and failed on other sets).

- `content_cov`: share of the summary's content words (stop words removed) found in the document.
- `trigram_cov`: share of the summary's word trigrams found in the document: a swapped entity,
  number or negation breaks the trigrams around it even when every word occurs somewhere.
- `context_support`: for each specific word of a summary sentence (a number, or a word rarer than
  Zipf 3.5 in wordfreq's English list: names, places, technical terms — what hallucinations invent),
  the best share of the sentence's other content words found in a window of three document sentences
  around an occurrence of that word; averaged over the summary. A name the document has, but in
  another story, gets low support.

Words are lower-cased and number words mapped to digits ("three" == "3"), so cased and lower-cased
corpora are treated alike.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

_STOP = frozenset("""a an the and or but if of to in on at by for with from as is are was were be been being it its
this that these those he she they them his her their we our you your i me my so than then there here
has have had do does did will would can could should may might must also into over after before about up down
out more most very just said says say who whom which what when where why how all any some such s t""".split())
_NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_NUMBER_WORDS.update({"thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70",
                      "eighty": "80", "ninety": "90", "hundred": "100", "thousand": "1000",
                      "million": "1000000", "billion": "1000000000"})
SPECIFIC_ZIPF = 3.5  # below this English word frequency a word counts as specific (wordfreq's Zipf scale)

FEATURE_NAMES = ["content_cov", "trigram_cov", "context_support"]

_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+(?:'[^\W\d_]+)?")
_SENT = re.compile(r"(?<=[.!?])\s+|\n+")


def tokens(text: str) -> list[str]:
    """Lower-cased words and numbers (thousands separators removed; number words mapped to digits)."""
    get = _NUMBER_WORDS.get
    return [get(t, t) if "," not in t else t.replace(",", "") for t in _TOKEN.findall(text.lower())]


def sentences(text: str) -> list[str]:
    return [s for s in _SENT.split(text) if s.strip()]


@lru_cache(maxsize=1)
def _zipf():
    from wordfreq import zipf_frequency  # the frequency lists ship inside the wheel

    return lru_cache(maxsize=500_000)(lambda w: zipf_frequency(w, "en"))


def is_specific(token: str) -> bool:
    return token[0].isdigit() or _zipf()(token) < SPECIFIC_ZIPF


def _trigrams(toks: list[str]) -> list[tuple]:
    return list(zip(toks, toks[1:], toks[2:]))


def _cov(items: list, ref) -> float:
    return sum(1 for x in items if x in ref) / len(items) if items else 1.0


@lru_cache(maxsize=256)
def _document_index(document: str):
    """Words, trigrams, 3-sentence windows and word -> windows, computed once per document."""
    sent_tokens = [tokens(s) for s in sentences(document)]
    toks = [t for st in sent_tokens for t in st]  # == tokens(document): no token spans a sentence break
    sents = [set(st) for st in sent_tokens]
    windows = [sents[i].union(sents[i - 1] if i else (), sents[i + 1] if i + 1 < len(sents) else ())
               for i in range(len(sents))]
    where: dict[str, list[int]] = {}
    for i, s in enumerate(sents):
        for t in s:
            where.setdefault(t, []).append(i)
    return set(toks), set(zip(toks, toks[1:], toks[2:])), windows, where


def pair_features(document: str, summary: str) -> list[float]:
    words, trigrams, windows, where = _document_index(document)
    s_tok = tokens(summary)
    support = []
    for sent in sentences(summary):
        content = [t for t in tokens(sent) if t not in _STOP]
        if not content:
            continue
        cset = set(content)
        for t in {t for t in content if is_specific(t)}:
            others = cset - {t}
            if t not in where:
                support.append(0.0)
            elif not others:
                support.append(1.0)
            else:
                support.append(max(len(others & windows[i]) for i in where[t]) / len(others))
    return [
        _cov([t for t in s_tok if t not in _STOP], words),
        _cov(_trigrams(s_tok), trigrams),
        float(np.mean(support)) if support else 1.0,
    ]


def feature_matrix(documents: list[str], summaries: list[str]) -> np.ndarray:
    if not documents:
        return np.zeros((0, len(FEATURE_NAMES)))
    return np.array([pair_features(d, s) for d, s in zip(documents, summaries)], dtype=np.float64)


_CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)(?<!\n)\b[^\W\d_a-z][^\W\d_]+")


def extrinsic_words(document: str, text: str) -> set[str]:
    """The specific words of `text` that the document lacks: numbers, words rarer than Zipf 3.5, and
    capitalised words not starting a sentence (names the frequency list knows)."""
    words = _document_index(document)[0]
    specific = {t for t in tokens(text) if t not in _STOP and is_specific(t)}
    specific |= {t for m in _CAPITALISED.findall(text) for t in tokens(m) if t not in _STOP}
    return {t for t in specific if t not in words}


def extrinsic_free(document: str, summary: str) -> float:
    """1.0 when every specific word of the summary occurs in the document (see `extrinsic_words`), else 0.0.

    A hard signal of extrinsic hallucination that needs no threshold: its natural cut holds across
    extractive (CNN/DM) and abstractive (XSum) summaries alike, unlike coverage, but it cannot see
    intrinsic errors (a name of the document put in the wrong place). An evaluation baseline."""
    return float(not extrinsic_words(document, summary))


def bigram_coverage(document: str, summary: str) -> float:
    """The single-feature baseline the evaluation compares against."""
    d, s = tokens(document), tokens(summary)
    ref = set(zip(d, d[1:]))
    return _cov(list(zip(s, s[1:])), ref)
