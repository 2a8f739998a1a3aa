"""Exact keys (normalised text, normalised URL): 64-bit hashes per row and first-occurrence picks.

`first_occurrence_drops` keeps, for every key, the row first in (shard, row) order and returns
the indices of the others with the row each repeats; it is one `np.unique` over 8 bytes per row, not a Python set. The build
(corpus/dedup/keyed.py) runs it per hash partition on the workers, never over the whole corpus.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

_KEY_SEED = 0xD1CE


def hash_keys(values: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 hash per row, valid mask); null keys are invalid and never deduplicated."""
    series = pl.Series(values) if not isinstance(values, pa.ChunkedArray) else pl.from_arrow(values)
    valid = series.is_not_null().to_numpy()
    return series.hash(seed=_KEY_SEED).to_numpy().astype(np.uint64, copy=False), valid


def first_occurrence_drops(hashes: list[np.ndarray], valid: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(global row indices, shards concatenated in order, whose key appeared at an earlier row; for each, the
    index of that first row, which is kept)."""
    if not hashes:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    all_h = np.concatenate(hashes)
    all_valid = np.concatenate(valid)
    rows = np.flatnonzero(all_valid)
    # index of the first occurrence of each key, and which key each row has
    _, first, inverse = np.unique(all_h[rows], return_index=True, return_inverse=True)
    keep = np.zeros(len(rows), bool)
    keep[first] = True
    return rows[~keep], rows[first[inverse.reshape(-1)][~keep]]
