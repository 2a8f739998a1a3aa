"""Vectorised MinHash signatures and LSH band keys.

One signature row per document: for each of K hash functions h_k(x) = ((a_k * x + b_k) mod 2**64)
>> 32 (multiply-shift, a_k odd: a 2-universal family on the high bits), the minimum over the
document's shingle hashes. Work is done on blocks of shingles (a (K, block) uint64 matrix that stays
in cache, one contiguous row per hash function) and reduced per document with `np.minimum.reduceat`, so there is no Python loop per
document or per shingle. Documents without shingles get an all-max row and `has_shingles=False`;
they are never clustered.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .ngrams import RollingHasher, mix64, tokenize

EMPTY = np.uint32(0xFFFFFFFF)


@dataclass(frozen=True)
class MinHashParams:
    num_perm: int
    ngram: int
    seed: int = 1

    def coefficients(self) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.Generator(np.random.PCG64(self.seed))
        a = rng.integers(1, 2**63, size=self.num_perm, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        b = rng.integers(0, 2**63, size=self.num_perm, dtype=np.uint64)
        return a, b


class MinHasher:
    def __init__(self, params: MinHashParams, *, block_shingles: int = 8192):
        self.params = params
        self.a, self.b = params.coefficients()
        self.block = block_shingles

    def signatures(self, text: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """(signatures uint32 (n_docs, K), has_shingles bool (n_docs,)) for a column of text."""
        tokens = tokenize(text)
        hashes, doc = RollingHasher(tokens).shingles(self.params.ngram)
        n_docs = len(tokens.offsets) - 1
        return self.from_shingles(hashes, doc, n_docs)

    def from_shingles(self, hashes: np.ndarray, doc: np.ndarray, n_docs: int) -> tuple[np.ndarray, np.ndarray]:
        K = self.params.num_perm
        sig = np.full((n_docs, K), EMPTY, np.uint32)
        has = np.zeros(n_docs, bool)
        if not len(hashes):
            return sig, has
        has[doc] = True
        # (K, block) layout: each hash function's values for a block of shingles are contiguous, so
        # the per-document minima (`reduceat` along the row) run over contiguous memory.
        buf = np.empty((K, self.block), np.uint64)
        a, b = self.a[:, None], self.b[:, None]
        with np.errstate(over="ignore"):
            for lo in range(0, len(hashes), self.block):
                hi = min(lo + self.block, len(hashes))
                x, d = hashes[lo:hi], doc[lo:hi]
                m = buf[:, : hi - lo]
                np.multiply(a, x[None, :], out=m)
                m += b
                # doc ids are sorted: reduce each run of equal ids to its minimum. The shift to the
                # high 32 bits is monotonic, so it is applied to the minima only (one pass fewer).
                change = np.empty(len(d), bool)
                change[0] = True
                np.not_equal(d[1:], d[:-1], out=change[1:])
                starts = np.flatnonzero(change)
                mins = (np.minimum.reduceat(m, starts, axis=1) >> np.uint64(32)).astype(np.uint32).T
                rows = d[starts]
                np.minimum(sig[rows], mins, out=mins)
                sig[rows] = mins
        return sig, has


def band_keys(sig: np.ndarray, band: int, rows: int) -> np.ndarray:
    """A 64-bit key per document for band `band` (columns band*rows .. +rows): equal keys = equal
    bands, up to 64-bit collisions."""
    cols = sig[:, band * rows:(band + 1) * rows].astype(np.uint64)
    key = np.full(len(sig), ((band + 1) * 0x9E3779B97F4A7C15) % 2**64, np.uint64)
    with np.errstate(over="ignore"):
        for j in range(rows):
            key = mix64(key ^ cols[:, j])
    return key


def jaccard_estimate(sig_a: np.ndarray, sig_b: np.ndarray) -> np.ndarray:
    """Row-wise fraction of equal signature entries (an unbiased estimate of Jaccard similarity)."""
    return (sig_a == sig_b).mean(axis=-1)
