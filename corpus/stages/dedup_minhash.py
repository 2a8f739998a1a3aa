"""Global fuzzy dedup: MinHash over word n-grams, LSH (bands x rows), connected components.

build, driver-light (through the executor's TaskMap: the process pool or Ray tasks; every file on
the storage filesystem under `<workdir>/minhash/`, so an `s3://` root works; the driver only adds
up counts):
  1. map over shards: MinHash signatures of the shard's rows, by row batch, saved whole as
     `sig-SSSSS.u32` (uint32, rows x num_perm), and every (band, band key, row) record split by a
     hash of its bucket (band, key) into P partitions: `buckets-PPPP/SSSSS.npz`;
  2. map over partitions: per band, an edge from each bucket's first document (in (shard, row)
     order) to every other member, optionally checked against the two full signatures read back
     from storage (`min_similarity`: removes chance band collisions);
  3. connected components on the workers (corpus/dedup/components.py: large-star / small-star
     rounds over hash-partitioned edges);
  4. map over partitions: every document that is not its component's first is written with the
     kept document's id to `near-PPPP.parquet` (id, kept_id). The state is those files.
A bucket lives whole in one partition, so the edges, the components and the kept documents are the
ones a single process finds over the whole corpus, whatever P, the workers or the executor.
apply: drops the listed ids as `near_duplicate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from manifests.storage import Location

from manifests.config import require
from ..dedup.components import star_components, write_edges
from ..dedup.drops import DropIds, check_columns, write_drop_ids
from ..dedup.lsh import SignatureReader, band_records, bucket_edges, bucket_key
from ..dedup.minhash import MinHasher, MinHashParams, jaccard_estimate
from ..dedup.spill import (as_location, ids_of, iter_batches, load_arrays, n_partitions, num_rows, pack,
                           partition_of, save_arrays, split_by_partition)
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


def _bucket_file(outdir: Location, part: int, shard: int) -> Location:
    return outdir.join(f"buckets-{part:04d}", f"{shard:05d}.npz")


def _sig_file(outdir: Location, shard: int) -> Location:
    return outdir.join(f"sig-{shard:05d}.u32")


def signature_shard(item: tuple[int, Location], *, cfg: MinHashDedupConfig, outdir: Location, parts: int) -> int:
    """Map side: one shard's signatures and its band records by partition; returns its row count."""
    index, shard = item
    check_columns(shard, ["id", cfg.field], "minhash_dedup_v1")
    hasher = MinHasher(cfg.params)
    n = num_rows(shard)
    sig = np.empty((n, cfg.params.num_perm), np.uint32)
    has = np.zeros(n, bool)
    row = 0
    for batch in iter_batches(shard, columns=[cfg.field], batch_rows=cfg.batch_rows):
        s, h = hasher.signatures(batch.column(0))
        sig[row:row + len(s)] = s
        has[row:row + len(s)] = h
        row += len(s)
    if cfg.min_similarity is not None:
        _sig_file(outdir, index).write_bytes_atomic(sig.tobytes())
    band, keys, nodes = band_records(sig, has, pack(index, np.arange(n)), bands=cfg.bands, rows=cfg.rows)
    for p, sel in enumerate(split_by_partition(partition_of(bucket_key(band, keys), parts), parts)):
        save_arrays(_bucket_file(outdir, p, index), band=band[sel].astype(np.int16), key=keys[sel], node=nodes[sel])
    return n


def bucket_partition(part: int, *, cfg: MinHashDedupConfig, outdir: Location, n_shards: int, parts: int) -> int:
    """Reduce side: the (verified) edges of this partition's buckets, addressed for components."""
    arrays = [load_arrays(_bucket_file(outdir, part, s), "minhash_dedup_v1") for s in range(n_shards)]
    band = np.concatenate([a["band"] for a in arrays]) if arrays else np.zeros(0, np.int16)
    keys = np.concatenate([a["key"] for a in arrays]) if arrays else np.zeros(0, np.uint64)
    nodes = np.concatenate([a["node"] for a in arrays]) if arrays else np.zeros(0, np.int64)
    reader = SignatureReader([_sig_file(outdir, s) for s in range(n_shards)], cfg.params.num_perm)
    src_all, dst_all = [], []
    for b in np.unique(band).tolist():
        sel = band == b  # shard files in order, rows in order inside each: nodes increase
        src, dst = bucket_edges(keys[sel], nodes[sel])
        if cfg.min_similarity is not None and len(src):
            ok = jaccard_estimate(reader.rows(src), reader.rows(dst)) >= cfg.min_similarity
            src, dst = src[ok], dst[ok]
        src_all.append(src)
        dst_all.append(dst)
    src = np.concatenate(src_all) if src_all else np.zeros(0, np.int64)
    dst = np.concatenate(dst_all) if dst_all else np.zeros(0, np.int64)
    write_edges(outdir.join("cc"), "ls", 0, part, src, dst, parts, both_directions=True)
    return len(src)


def near_duplicate_ids(item: tuple[int, Location], *, shards: list[Location], outdir: Location) -> int:
    """The ids of one partition's dropped documents and of the documents kept in their stead."""
    part, leaves = item
    z = load_arrays(leaves, "minhash_dedup_v1 components")
    order = np.argsort(z["node"], kind="stable")
    node, root = z["node"][order], z["root"][order]
    write_drop_ids(outdir.join(f"near-{part:04d}.parquet"), ids_of(shards, node), {"kept_id": ids_of(shards, root)})
    return len(node)


@register
class MinHashDedup(GlobalStage):
    """Near-duplicate removal (MinHash + LSH + connected components); drops `near_duplicate`."""

    name = "minhash_dedup_v1"
    Config = MinHashDedupConfig

    def build(self, shards: list, *, workdir, tasks: TaskMap) -> list[Location] | None:
        shards = [as_location(s) for s in shards]
        if not shards:
            return None
        outdir = as_location(workdir).join("minhash")
        outdir.mkdir()
        parts = n_partitions(tasks, len(shards))
        cfg = self.config
        tasks.map(partial(signature_shard, cfg=cfg, outdir=outdir, parts=parts), list(enumerate(shards)))
        tasks.map(partial(bucket_partition, cfg=cfg, outdir=outdir, n_shards=len(shards), parts=parts), range(parts))
        leaves, _ = star_components(tasks, outdir.join("cc"), parts)
        tasks.map(partial(near_duplicate_ids, shards=shards, outdir=outdir), list(enumerate(leaves)))
        return [outdir.join(f"near-{p:04d}.parquet") for p in range(parts)]

    def bind(self, state) -> Stage:
        return ApplyMinHashDedup(self.config, state)


class ApplyMinHashDedup(DropIds):
    name = "minhash_dedup_v1"
    Config = MinHashDedupConfig
    reason = "near_duplicate"
