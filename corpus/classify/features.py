"""Hashed bag of word n-grams (fastText's input representation, without its embedding layer).

Each document becomes a sparse row over `2**bits` buckets: the counts of its word 1..max_n-grams
(tokenised as everywhere else in the corpus: lowercase, punctuation folded), each n-gram hashed to
a bucket, then L2-normalised so long and short documents weigh alike.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from scipy.sparse import csr_matrix

from ..dedup.ngrams import RollingHasher, tokenize


def featurize(text: pa.ChunkedArray | pa.Array, *, bits: int, max_n: int) -> csr_matrix:
    tokens = tokenize(text)
    n_docs = len(tokens.offsets) - 1
    roll = RollingHasher(tokens)
    rows, cols = [], []
    mask = np.uint64((1 << bits) - 1)
    for n in range(1, max_n + 1):
        h, doc = roll.ngrams(n)
        rows.append(doc)
        cols.append((h & mask).astype(np.int64))
    r = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    m = csr_matrix((np.ones(len(r), np.float32), (r, c)), shape=(n_docs, 1 << bits))
    m.sum_duplicates()
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    norms[norms == 0] = 1
    return csr_matrix(m.multiply(1 / norms[:, None]))
