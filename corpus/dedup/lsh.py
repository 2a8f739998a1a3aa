"""LSH pieces: edges from each bucket's first member, signature rows read back from storage for
verification, and a single-process connected-components reference (scipy) for small graphs.

The distributed build (corpus/stages/dedup_minhash.py) partitions (band, key) buckets across
workers; a bucket lives whole in one partition, so its edges are the same as over the whole corpus.
Components are then found on the workers by corpus/dedup/components.py.
"""

from __future__ import annotations

import numpy as np

from manifests.storage import Location
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .minhash import band_keys
from .spill import require, unpack


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


def band_records(sig: np.ndarray, has: np.ndarray, nodes: np.ndarray, *, bands: int,
                 rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(band, key, node) for every band of every document with shingles. A band's key hashes only
    its own columns; the bucket is the pair (band, key)."""
    sel = np.flatnonzero(has)
    sig, nodes = sig[sel], nodes[sel]
    band = np.repeat(np.arange(bands, dtype=np.int64), len(sel))
    keys = np.concatenate([band_keys(sig[:, b * rows:(b + 1) * rows], 0, rows) for b in range(bands)]) \
        if len(sel) else np.zeros(0, np.uint64)
    return band, keys, np.tile(nodes, bands)


def bucket_key(band: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """One uint64 per (band, key) to partition buckets by (equal buckets, equal value)."""
    with np.errstate(over="ignore"):
        return keys ^ (band.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))


class SignatureReader:
    """Rows of the per-shard signature files (raw uint32, rows x num_perm) on the storage filesystem,
    fetched by packed (shard, row) address: a few random reads, or the whole file when many rows of
    one shard are wanted."""

    def __init__(self, files: list[Location], num_perm: int):
        self.files = files
        self.k = num_perm

    def rows(self, nodes: np.ndarray) -> np.ndarray:
        out = np.empty((len(nodes), self.k), np.uint32)
        shard, row = unpack(nodes)
        width = 4 * self.k
        for s in np.unique(shard).tolist():
            sel = np.flatnonzero(shard == s)
            loc = self.files[s]
            require(loc, "minhash_dedup_v1 signatures")
            with loc.fs.open_input_file(loc.path) as f:
                if len(sel) * 16 > f.size() // width:  # many rows: one sequential read
                    whole = np.frombuffer(f.read(), np.uint32).reshape(-1, self.k)
                    out[sel] = whole[row[sel]]
                else:
                    for i, r in zip(sel.tolist(), row[sel].tolist()):
                        out[i] = np.frombuffer(f.read_at(width, r * width), np.uint32)
        return out
