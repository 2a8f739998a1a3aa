"""Decontamination of math seeds and generated questions against benchmark test sets.

A question is contaminated when it shares a word n-gram (default 10 words, lower-cased, punctuation
stripped) with any test question. Short math problems make long n-grams rare by chance, and a
rephrase that copies ten words in a row from a test item is too close to train on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

import pyarrow as pa

from manifests.config import require
from corpus.decontam.benchmarks import NOT_BUNDLED, benchmarks_dir, check_available, raw_items
from corpus.registry import register
from corpus.stage import Filter

TEST_SETS = {  # name: (benchmark in corpus/decontam/benchmarks.py, index of the question segment)
    "gsm8k_test": ("gsm8k", 0),
    "math_test": ("math", 0),
    "math500": ("math500", 0),
    "gsm_hard": ("gsm_hard", 0),
    "svamp": ("svamp", 0),
    "asdiv": ("asdiv", 0),
}
# the default: every set shipped with cidermill (asdiv is not, for its license; name it with a folder)
DEFAULT_TEST_SETS = sorted(k for k, (b, _) in TEST_SETS.items() if b not in NOT_BUNDLED)


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    w = words(text)
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def ngram_list(text: str, n: int) -> list[tuple[str, ...]]:
    """The word n-grams in text order (the first shared one is the evidence a drop shows)."""
    w = words(text)
    return [tuple(w[i:i + n]) for i in range(len(w) - n + 1)]


@lru_cache(maxsize=4)
def test_index(n: int, folder: str | None, names: tuple[str, ...]) -> dict[tuple[str, ...], tuple[str, str]]:
    """Every test n-gram -> (test set, item id) of the first item (in `names` order) that has it."""
    grams: dict[tuple[str, ...], tuple[str, str]] = {}
    for name in names:
        bench, seg = TEST_SETS[name]
        for item in raw_items(bench, benchmarks_dir(folder)):
            if len(item.segments) > seg:
                for g in ngrams(str(item.segments[seg] or ""), n):
                    grams.setdefault(g, (name, item.item_id))
    return grams


@dataclass(frozen=True, kw_only=True)
class DecontamConfig:
    text_field: str = "question"
    n_words: int = 10
    test_sets: list[str] = field(default_factory=lambda: list(DEFAULT_TEST_SETS))
    benchmarks_dir: str | None = None  # default: $CIDERMILL_BENCHMARKS, else the copies shipped with cidermill

    def __post_init__(self):
        require(self.n_words >= 5, f"n_words must be >= 5 (shorter n-grams match by chance); got {self.n_words}")
        unknown = sorted(set(self.test_sets) - set(TEST_SETS))
        require(not unknown, f"unknown test sets {unknown}; choose from {sorted(TEST_SETS)}")
        check_available([TEST_SETS[t][0] for t in self.test_sets], benchmarks_dir(self.benchmarks_dir))


@register
class MathDecontam(Filter):
    name = "math_seed_decontam_v1"
    Config = DecontamConfig

    def reasons(self, table: pa.Table) -> tuple[pa.Array, list]:
        """`test_overlap` with `{"test_set", "item", "ngram"}`: the question's first n-gram (in text order)
        found in a test question, and the test item that has it."""
        c = self.config
        index = test_index(c.n_words, c.benchmarks_dir, tuple(sorted(c.test_sets)))
        found = []
        for q in table.column(c.text_field).to_pylist():
            hit = next((g for g in ngram_list(q or "", c.n_words) if g in index), None)
            found.append(None if hit is None else {"test_set": index[hit][0], "item": index[hit][1],
                                                   "ngram": " ".join(hit)})
        return pa.array([None if f is None else "test_overlap" for f in found], pa.string()), found
