"""Math filters: pages/s for the tag + symbol scorer (pyarrow regex over a column) vs the per-document
Python approach (a `str.count` per tag, a set lookup per character, a regex for LaTeX commands) on the
same pages, checking both give the same counts; plus Q&A extraction and classifier throughput.

Data: the labelled page set of the math_filter eval (543 pages, ../shared/data). Run:
    .venv/bin/python benchmarks/math_filters.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402

from corpus.math.classifier import load_model, predict  # noqa: E402
from corpus.math.html_math import page_text  # noqa: E402
from evals.data.math_labelled import labelled_set  # noqa: E402
from corpus.math.qa import extract_qa  # noqa: E402
from corpus.math.signals import MATH_TAGS, latex_words, math_columns, math_symbols  # noqa: E402


def python_counts(pages: list[str]) -> list[tuple[int, int, int]]:
    symbols = set(math_symbols())
    latex = re.compile(r"\\(?:" + "|".join(sorted(latex_words(), key=len, reverse=True)) + r")(?:[^A-Za-z]|$)")
    out = []
    for page in pages:
        n_tags = sum(page.count(t) for t in MATH_TAGS)
        n_sym = sum(1 for ch in page if ch in symbols)
        out.append((n_tags, n_sym, len(latex.findall(page))))
    return out


def timed(fn, repeat: int):
    start = time.perf_counter()
    for _ in range(repeat):
        out = fn()
    return out, (time.perf_counter() - start) / repeat


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    pages = [r["html"] for r in labelled_set()]
    mb = sum(len(p.encode()) for p in pages) / 1e6
    column = pa.array(pages, pa.string())
    ours, t_ours = timed(lambda: math_columns(column), args.repeat)
    peer, t_peer = timed(lambda: python_counts(pages), args.repeat)
    same = [(a, b, c) for a, b, c in zip(ours["math__n_tags"].to_pylist(), ours["math__n_symbols"].to_pylist(),
                                         ours["math__n_latex"].to_pylist())] == peer
    n = len(pages)
    print(f"{n} pages, {mb:.1f} MB of HTML")
    print(f"math_signals (pyarrow regex)     {n / t_ours:9.0f} pages/s  {mb / t_ours:6.1f} MB/s")
    print(f"per-document Python counting     {n / t_peer:9.0f} pages/s  {mb / t_peer:6.1f} MB/s   same counts: {same}")
    print(f"ratio: {t_peer / t_ours:.1f}x")
    _, t_qa = timed(lambda: [extract_qa(p) for p in pages], 1)
    texts, t_text = timed(lambda: [page_text(p) for p in pages], 1)
    model = load_model()
    _, t_clf = timed(lambda: predict(model, texts), args.repeat)
    print(f"Q&A extraction (lxml)            {n / t_qa:9.0f} pages/s")
    print(f"page text with LaTeX (lxml)      {n / t_text:9.0f} pages/s")
    print(f"math classifier (hashed n-grams) {n / t_clf:9.0f} pages/s")


if __name__ == "__main__":
    main()
