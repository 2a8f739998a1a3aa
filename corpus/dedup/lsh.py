"""LSH over spilled signatures: one band at a time, edges to each bucket's first member, then
connected components.

Memory: one band of keys for the whole corpus (16 bytes per document) plus the edges found so far;
signatures stay on disk (memory-mapped `.npy` per shard) and are read one band's columns at a time.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .minhash import band_keys, jaccard_estimate


def bucket_edges(keys: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges (first, other) for every bucket of equal keys with more than one member; `first` is
    the member with the smallest global index (members are given in increasing order)."""
    order = np.argsort(keys, kind="stable")  # stable: within a bucket, global order is kept
    k = keys[order]
    m = members[order]
    new_bucket = np.r_[True, k[1:] != k[:-1]]
    bucket_id = np.cumsum(new_bucket) - 1
    first = m[np.flatnonzero(new_bucket)][bucket_id]
    dup = ~new_bucket
    return first[dup], m[dup]


def components(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Component label per node (0..n-1) of the undirected graph with the given edges."""
    if not len(src):
        return np.arange(n)
    graph = coo_matrix((np.ones(len(src), np.int8), (src, dst)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    return labels


def drop_mask_from_components(labels: np.ndarray) -> np.ndarray:
    """True for every node that is not the smallest index of its component (those are kept)."""
    first_of_label = np.full(labels.max() + 1, len(labels), np.int64)
    np.minimum.at(first_of_label, labels, np.arange(len(labels)))
    return first_of_label[labels] != np.arange(len(labels))


class SignatureStore:
    """Per-shard signature files (memory-mapped) addressed by a global document index."""

    def __init__(self, paths: list[str], has_paths: list[str]):
        self.sigs = [np.load(p, mmap_mode="r") for p in paths]
        self.has = [np.load(p) for p in has_paths]
        sizes = np.array([len(s) for s in self.sigs], np.int64)
        self.offsets = np.r_[0, np.cumsum(sizes)]

    @property
    def n_docs(self) -> int:
        return int(self.offsets[-1])

    def band(self, band: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """(keys, global indices) of documents with shingles, for one band."""
        keys, idx = [], []
        for i, (sig, has) in enumerate(zip(self.sigs, self.has)):
            cols = np.asarray(sig[:, band * rows:(band + 1) * rows])
            sel = np.flatnonzero(has)
            keys.append(band_keys(cols[sel], 0, rows))
            idx.append(sel + self.offsets[i])
        return np.concatenate(keys), np.concatenate(idx)

    def rows(self, global_idx: np.ndarray) -> np.ndarray:
        """Full signatures of the given documents (any order)."""
        out = None
        shard = np.searchsorted(self.offsets, global_idx, side="right") - 1
        for s in np.unique(shard):
            sel = np.flatnonzero(shard == s)
            part = np.asarray(self.sigs[s][global_idx[sel] - self.offsets[s]])
            if out is None:
                out = np.empty((len(global_idx), part.shape[1]), part.dtype)
            out[sel] = part
        return out if out is not None else np.zeros((0, 0), np.uint32)


def near_duplicate_drops(store: SignatureStore, *, bands: int, rows: int,
                         min_similarity: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Global indices of documents to drop and, for each, the index of the kept document of its
    cluster. With `min_similarity`, a bucket edge counts only if the two full signatures agree on
    at least that fraction of entries (removes chance band collisions of dissimilar documents)."""
    src_all, dst_all = [], []
    for b in range(bands):
        keys, idx = store.band(b, rows)
        src, dst = bucket_edges(keys, idx)
        if min_similarity is not None and len(src):
            ok = jaccard_estimate(store.rows(src), store.rows(dst)) >= min_similarity
            src, dst = src[ok], dst[ok]
        if len(src):
            pairs = np.unique(np.stack([src, dst], axis=1), axis=0)
            src_all.append(pairs[:, 0])
            dst_all.append(pairs[:, 1])
    n = store.n_docs
    src = np.concatenate(src_all) if src_all else np.zeros(0, np.int64)
    dst = np.concatenate(dst_all) if dst_all else np.zeros(0, np.int64)
    labels = components(n, src, dst)
    drop = drop_mask_from_components(labels)
    first_of_label = np.full(labels.max() + 1 if n else 0, n, np.int64)
    np.minimum.at(first_of_label, labels, np.arange(n))
    dropped = np.flatnonzero(drop)
    return dropped, first_of_label[labels[dropped]]
