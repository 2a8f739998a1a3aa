"""Labelled safety rows and the page-sized units built from them, for training the page-safety model
(corpus/web/safety_train.py) and for `cidermill eval data safety`. Nothing here runs in a pipeline:
every function that reads data takes the folder as an argument (development machines have it at
../shared/data/safety_real; product code never reads it).

A row file is gzip JSON Lines with {id, text, label (1 = drop, 0 = keep), category, source}, one file
per source (the folder's SOURCE.txt describes the sources and how their labels were mapped).

Length is confounded with the label there: the unsafe rows are mostly short posts, the safe news and
health rows long articles. Both builders below therefore give both classes the same lengths:
- `train_units`: units of L words, L drawn uniformly from [MIN_WORDS, MAX_WORDS] for every unit of
  either class; a long row is cut into such pieces, short rows of one source, label and category are
  joined (in a seeded random order) until they reach L. The model sees ~100-word texts on both sides,
  the size of the stage's scoring window.
- `eval_pages`: pages of at least MIN_WORDS words: a row that long as it is (the natural passages),
  shorter rows of one source, label and category joined until the page reaches MIN_WORDS.
Words are the page-safety tokens (corpus/web/safety_terms.tokens: lower-case, de-obfuscated).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path

from . import safety_terms

MIN_WORDS = 50
MAX_WORDS = 150
SAFE_TARGETS = ("news", "health")  # the safe categories whose false drops the threshold is held to
CATEGORIES = ("sexual", "hate", "harassment", "profanity", "toxic_unspecified", "news", "health", "other_safe")


@dataclass(frozen=True)
class Unit:
    tokens: list[str]
    label: int
    category: str
    source: str
    natural: bool  # one row of >= MIN_WORDS words (False: a piece of a row, or short rows joined)
    text: str = ""  # eval pages only: the rows' texts joined by blank lines


def read_rows(folder: Path) -> list[dict]:
    """Every row of every *.jsonl.gz in `folder`, in file order; a bad row is an error naming file and line."""
    folder = Path(folder)
    files = sorted(folder.glob("*.jsonl.gz"))
    if not files:
        raise FileNotFoundError(f"{folder}: no *.jsonl.gz row files (expected the safety_real folder)")
    rows = []
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                try:
                    row = json.loads(line)
                    ok = isinstance(row.get("text"), str) and row.get("label") in (0, 1) \
                        and row.get("category") in CATEGORIES and isinstance(row.get("source"), str)
                except json.JSONDecodeError:
                    ok = False
                if not ok:
                    raise ValueError(f"{path}:{n}: expected JSON with text, label 0/1, category in {CATEGORIES} "
                                     f"and source; got {line[:120]!r}")
                rows.append(row)
    return rows


def file_digests(folder: Path) -> dict[str, str]:
    """sha256 of each row file, by file name (the model's manifest records them)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(Path(folder).glob("*.jsonl.gz"))}


def tokenize(rows: list[dict]) -> list[list[str]]:
    lex = safety_terms.load()
    return [safety_terms.tokens(r["text"], lex) for r in rows]


def _groups(rows: list[dict], toks: list[list[str]]) -> dict[tuple, list[tuple[list[str], str]]]:
    out: dict[tuple, list[tuple[list[str], str]]] = {}
    for r, t in zip(rows, toks):
        out.setdefault((r["source"], r["label"], r["category"]), []).append((t, r["text"]))
    return out


def _rng(seed: int, key: tuple) -> random.Random:
    """One generator per (source, label, category): a source's units do not depend on the other sources
    present, so leave-one-source-out folds can share them."""
    return random.Random(f"{seed}:{key[0]}:{key[1]}:{key[2]}")


def _shuffled(rows: list[dict], toks: list[list[str]], seed: int):
    """(key, its generator, its (tokens, text) items in that generator's order) per group, in key order."""
    for key, items in sorted(_groups(rows, toks).items()):
        rng = _rng(seed, key)
        items = items[:]
        rng.shuffle(items)
        yield key, rng, items


def train_units(rows: list[dict], toks: list[list[str]], seed: int = 0) -> list[Unit]:
    """Units of L ~ U[MIN_WORDS, MAX_WORDS] words for both classes (module docstring)."""
    out: list[Unit] = []
    for (source, label, category), rng, items in _shuffled(rows, toks, seed):
        target = rng.randint(MIN_WORDS, MAX_WORDS)
        buf: list[str] = []
        for t, _ in items:
            if len(t) >= MIN_WORDS:
                for start in range(0, len(t), target):
                    piece = t[start:start + target]
                    if len(piece) >= MIN_WORDS // 2:  # a row's short tail is not a unit of its own
                        out.append(Unit(piece, label, category, source, False))
                    target = rng.randint(MIN_WORDS, MAX_WORDS)
                continue
            buf += t
            if len(buf) >= target:
                out.append(Unit(buf, label, category, source, False))
                buf, target = [], rng.randint(MIN_WORDS, MAX_WORDS)
        if len(buf) >= MIN_WORDS // 2:
            out.append(Unit(buf, label, category, source, False))
    return out


def eval_pages(rows: list[dict], toks: list[list[str]], seed: int = 1) -> list[Unit]:
    """Pages of >= MIN_WORDS words: long rows as they are, short ones joined (module docstring). The
    joined short rows' leftover (< MIN_WORDS words) is not a page."""
    out: list[Unit] = []
    for (source, label, category), _, items in _shuffled(rows, toks, seed):
        buf: list[str] = []
        texts: list[str] = []
        for t, text in items:
            if len(t) >= MIN_WORDS:
                out.append(Unit(t, label, category, source, True, text))
                continue
            buf += t
            texts.append(text)
            if len(buf) >= MIN_WORDS:
                out.append(Unit(buf, label, category, source, False, "\n\n".join(texts)))
                buf, texts = [], []
    return out
