"""Decontamination of math seeds and generated questions against benchmark test sets.

A question is contaminated when it shares a word n-gram (default 10 words, lower-cased, punctuation
stripped) with any test question. Short math problems make long n-grams rare by chance, and a
rephrase that copies ten words in a row from a test item is too close to train on.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pyarrow as pa

from corpus.config import require
from corpus.registry import register
from corpus.stage import Filter

from .paths import shared_data

TEST_SETS = {  # relative to the shared data folder: (file, question field)
    "gsm8k_test": ("benchmarks/gsm8k/test.jsonl", "question"),
    "math_test": ("benchmarks/math_eval_harness/math/test.jsonl", "problem"),
    "math500": ("benchmarks/math_eval_harness/math_oai/test.jsonl", "problem"),
    "gsm_hard": ("benchmarks/math_eval_harness/gsm_hard/test.jsonl", "input"),
    "svamp": ("benchmarks/math_eval_harness/svamp/test.jsonl", "Body"),
    "asdiv": ("benchmarks/math_eval_harness/asdiv/test.jsonl", "body"),
}


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    w = words(text)
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


@lru_cache(maxsize=4)
def test_index(n: int, root: str, names: tuple[str, ...]) -> frozenset:
    grams: set = set()
    for name in names:
        rel, fld = TEST_SETS[name]
        path = Path(root) / rel
        if not path.exists():
            raise FileNotFoundError(f"decontamination set {name} not found at {path} (set CIDERMILL_SHARED_DATA)")
        with path.open(encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                grams |= ngrams(str(rec.get(fld) or ""), n)
    return frozenset(grams)


@dataclass(frozen=True, kw_only=True)
class DecontamConfig:
    text_field: str = "question"
    n_words: int = 10
    test_sets: list[str] = field(default_factory=lambda: sorted(TEST_SETS))
    data_root: str | None = None  # default: the shared data folder

    def __post_init__(self):
        require(self.n_words >= 5, f"n_words must be >= 5 (shorter n-grams match by chance); got {self.n_words}")
        unknown = sorted(set(self.test_sets) - set(TEST_SETS))
        require(not unknown, f"unknown test sets {unknown}; choose from {sorted(TEST_SETS)}")


@register
class MathDecontam(Filter):
    name = "math_seed_decontam_v1"
    Config = DecontamConfig

    def reasons(self, table: pa.Table) -> pa.Array:
        c = self.config
        index = test_index(c.n_words, str(c.data_root or shared_data()), tuple(sorted(c.test_sets)))
        out = [None if not (ngrams(q or "", c.n_words) & index) else "test_overlap"
               for q in table.column(c.text_field).to_pylist()]
        return pa.array(out, pa.string())
