"""Global fuzzy dedup: MinHash over word n-grams, LSH (bands x rows), connected components.

build (through the executor's TaskMap, so it runs on the process pool or on Ray):
  1. every shard in parallel: MinHash signatures of its rows, streamed by row batch and written to
     `<workdir>/minhash/sig-NNNNN.npy` (uint32, rows x num_perm) -- memory is one batch;
  2. the driver, one band at a time: band keys of all documents (memory-mapped columns), an edge
     from each bucket's first document to every other member, optionally checked against the full
     signatures (`min_similarity`), then connected components over all edges;
  3. in every component the document first in (shard, row) order is kept, the others are written to
     `<workdir>/minhash/near_duplicates.parquet` (id, kept_id). The state is that path.
apply: drops the listed ids as `near_duplicate`.

The kept document does not depend on which worker ran what: the order is the shard order the
executor gives and the row order inside each shard.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from manifests.config import require
from ..dedup.drops import DropIds, check_columns, write_drop_ids
from ..dedup.lsh import SignatureStore, near_duplicate_drops
from ..dedup.minhash import MinHasher, MinHashParams
from ..registry import register
from ..stage import GlobalStage, Stage, TaskMap


@dataclass(frozen=True, kw_only=True)
class MinHashDedupConfig:
    field: str = "text"
    ngram: int = 5  # words per shingle (text lowercased, punctuation and whitespace folded)
    bands: int = 16
    rows: int = 7  # num_perm = bands * rows; candidate threshold ~ (1/bands)**(1/rows) = 0.67
    min_similarity: float | None = 0.7  # verify bucket pairs on the full signature; null = trust LSH
    seed: int = 1
    batch_rows: int = 1024  # rows hashed at a time while building (bounds memory: ~50 MB per 1k long pages)

    def __post_init__(self):
        require(self.ngram >= 1, f"ngram must be >= 1; got {self.ngram}")
        require(self.bands >= 1 and self.rows >= 1, f"bands and rows must be >= 1; got {self.bands} x {self.rows}")
        require(self.bands * self.rows <= 1024, f"bands * rows (num_perm) must be <= 1024; got {self.bands * self.rows}")
        require(self.min_similarity is None or 0 < self.min_similarity <= 1,
                f"min_similarity must be in (0, 1] or null; got {self.min_similarity}")
        require(self.batch_rows > 0, f"batch_rows must be > 0; got {self.batch_rows}")

    @property
    def params(self) -> MinHashParams:
        return MinHashParams(num_perm=self.bands * self.rows, ngram=self.ngram, seed=self.seed)


def signature_shard(item: tuple[int, str], *, cfg: MinHashDedupConfig, outdir: str) -> tuple[str, str]:
    """Signatures of one shard, written next to a `has shingles` mask; returns the two paths."""
    index, path = item
    check_columns(path, ["id", cfg.field], "minhash_dedup_v1")
    hasher = MinHasher(cfg.params)
    pf = pq.ParquetFile(path)
    n = pf.metadata.num_rows
    sig_path = os.path.join(outdir, f"sig-{index:05d}.npy")
    has_path = os.path.join(outdir, f"has-{index:05d}.npy")
    sig = np.lib.format.open_memmap(sig_path + ".tmp.npy", mode="w+", dtype=np.uint32,
                                    shape=(n, cfg.params.num_perm))
    has = np.zeros(n, bool)
    row = 0
    for batch in pf.iter_batches(batch_size=cfg.batch_rows, columns=[cfg.field]):
        s, h = hasher.signatures(batch.column(0))
        sig[row:row + len(s)] = s
        has[row:row + len(s)] = h
        row += len(s)
    sig.flush()
    del sig
    os.replace(sig_path + ".tmp.npy", sig_path)
    np.save(has_path, has)
    return sig_path, has_path


@register
class MinHashDedup(GlobalStage):
    """Near-duplicate removal (MinHash + LSH + connected components); drops `near_duplicate`."""

    name = "minhash_dedup_v1"
    Config = MinHashDedupConfig

    def build(self, shards: list[str], *, workdir: str, tasks: TaskMap) -> str | None:
        outdir = os.path.join(workdir, "minhash")
        os.makedirs(outdir, exist_ok=True)
        paths = tasks.map(partial(signature_shard, cfg=self.config, outdir=outdir), list(enumerate(shards)))
        if not paths:
            return None
        store = SignatureStore([p[0] for p in paths], [p[1] for p in paths])
        dropped, kept = near_duplicate_drops(store, bands=self.config.bands, rows=self.config.rows,
                                             min_similarity=self.config.min_similarity)
        ids = _ids_at(shards, store.offsets, np.concatenate([dropped, kept]))
        return write_drop_ids(os.path.join(outdir, "near_duplicates.parquet"),
                              ids.slice(0, len(dropped)), {"kept_id": ids.slice(len(dropped))})

    def bind(self, state: str | None) -> Stage:
        return ApplyMinHashDedup(self.config, state)


class ApplyMinHashDedup(DropIds):
    name = "minhash_dedup_v1"
    Config = MinHashDedupConfig
    reason = "near_duplicate"


def _ids_at(shards: list[str], offsets: np.ndarray, global_idx: np.ndarray) -> pa.Array:
    """The `id` values at global row indices (reading only the shards that hold them)."""
    out: list = [None] * len(global_idx)
    shard_of = np.searchsorted(offsets, global_idx, side="right") - 1
    for s in np.unique(shard_of):
        sel = np.flatnonzero(shard_of == s)
        ids = pq.read_table(shards[s], columns=["id"]).column("id")
        for i, v in zip(sel.tolist(), ids.take(pa.array(global_idx[sel] - offsets[s])).to_pylist()):
            out[i] = v
    return pa.array(out, pa.string())
