"""Decontamination against evaluation benchmarks: a two-pass global stage.

build (through the executor's TaskMap; every file on the storage filesystem under
`<workdir>/decontam/`, so an `s3://` root works; the driver holds the index and counts only):
  1. the driver loads the benchmarks (corpus/decontam/benchmarks.py) and builds the n-gram index
     (corpus/decontam/index.py), or reads it from CIDERMILL_CACHE, and broadcasts it once
     (`TaskMap.broadcast`: Ray's object store on Ray; locally each worker process reads the cache file
     itself, checked to be the one the driver read, and only where the cache cannot be written is the
     index saved as `index.npz` in the work folder);
  2. map over shards: the (document, benchmark n-gram) collisions of its rows, spilled to
     `hits-SSSSS.npz`; the task returns only how many documents hold each colliding n-gram;
  3. the driver sums those counts into one counter per indexed n-gram (memory: the index's size,
     not the corpus's): an n-gram found in >= `common_threshold` documents is common usage ("of
     the following", a famous quote), not contamination, and is ignored (the AFM report: 1000);
  4. map over shards: every document with a remaining collision is contaminated; its most specific
     match (longest n) is recorded -- benchmark, item id, the n-gram -- in
     `contaminated-SSSSS.parquet`. The state is those files, in shard order.
apply: drops those ids with reason `contaminated:<benchmark>` and a JSON `drop_detail`
({benchmark, item, ngram, n, n_matches}) on the rejects.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from dataclasses import field as dc_field
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from manifests.storage import Location

from manifests.config import require
from ..decontam.benchmarks import DEFAULT_BENCHMARKS, READERS, benchmarks_dir, check_available, data_info, load_items
from ..decontam.index import NgramIndex
from ..decontam.index_cache import CacheEntry, cached_index, read_entry
from ..dedup.drops import check_columns, drop_lists_key
from ..dedup.ngrams import tokenize
from ..dedup.spill import as_location, iter_batches, load_arrays, read_table, save_arrays, write_table
from ..registry import register
from ..stage import Filter, GlobalStage, Shared, Stage, StageResult, TaskMap, drop_by_reason, with_columns

log = logging.getLogger("cidermill.decontam")


@dataclass(frozen=True, kw_only=True)
class DecontamConfig:
    field: str = "text"
    benchmarks: list[str] = dc_field(default_factory=lambda: list(DEFAULT_BENCHMARKS))  # corpus/decontam/benchmarks.py
    benchmarks_dir: str | None = None  # default: $CIDERMILL_BENCHMARKS, else the copies shipped with cidermill
    min_n: int = 8  # segments shorter than this are not indexed (the AFM report goes down to 4 at web scale)
    max_n: int = 13  # long segments are matched by any shared max_n-gram
    common_threshold: int = 1000  # an n-gram in this many documents or more is common usage, not a leak
    batch_rows: int = 4096

    def __post_init__(self):
        require(bool(self.benchmarks), "benchmarks must name at least one benchmark")
        unknown = [b for b in self.benchmarks if b not in READERS]
        require(not unknown, f"unknown benchmarks {unknown}; known: {', '.join(sorted(READERS))}")
        check_available(self.benchmarks, benchmarks_dir(self.benchmarks_dir))  # missing data: error before any work
        require(1 <= self.min_n <= self.max_n, f"need 1 <= min_n <= max_n; got {self.min_n}..{self.max_n}")
        require(self.common_threshold >= 1, f"common_threshold must be >= 1; got {self.common_threshold}")
        require(self.batch_rows > 0, f"batch_rows must be > 0; got {self.batch_rows}")


def build_index(cfg: DecontamConfig) -> tuple[NgramIndex, bytes, CacheEntry | None]:
    """(index, its `.npz` bytes, the cache file holding them or None); built once per benchmarks' data,
    settings and code, then read from CIDERMILL_CACHE (corpus/decontam/index_cache.py)."""
    folder = benchmarks_dir(cfg.benchmarks_dir)

    def build() -> NgramIndex:
        items = {name: load_items(name, folder) for name in cfg.benchmarks}
        log.info("decontam benchmarks: %s", ", ".join(f"{n} ({len(v)} items, {src})" for (n, v), src in
                                                       zip(items.items(), check_available(items, folder).values())))
        return NgramIndex.build(items, min_n=cfg.min_n, max_n=cfg.max_n)

    return cached_index(list(cfg.benchmarks), folder, min_n=cfg.min_n, max_n=cfg.max_n, build=build)


def load_from_cache(location: Location, *, cfg: DecontamConfig, entry: CacheEntry) -> NgramIndex:
    """A worker's copy of the index the driver broadcast from its cache file (`location` is that file): read
    when the file is still the one the driver read (same inode, size and time) and a valid index; otherwise
    (removed, replaced, damaged since) read through the cache again, rebuilt if need be. The cache key covers
    everything the index is made from and the build is deterministic, so both give the driver's arrays."""
    index = read_entry(entry, list(cfg.benchmarks), min_n=cfg.min_n, max_n=cfg.max_n)
    if index is None:
        log.warning("decontam index cache %s changed during the run; reading through the cache again", location.uri)
        index = build_index(cfg)[0]
    return index


def _hits_file(outdir: Location, shard: int) -> Location:
    return outdir.join(f"hits-{shard:05d}.npz")


def collisions_shard(item: tuple[int, Location], *, cfg: DecontamConfig, index: Shared, outdir: Location):
    """Spill (row, n-gram key) collisions of one shard; return (keys, document counts)."""
    i, shard = item
    check_columns(shard, ["id", cfg.field], "decontaminate_v1")
    idx = index.get()
    rows, keys = [], []
    offset = 0
    for batch in iter_batches(shard, columns=[cfg.field], batch_rows=cfg.batch_rows):
        doc, k, pos = idx.find(tokenize(batch.column(0)))
        rows.append(doc + offset)
        keys.append(idx.key(k, pos))
        offset += batch.num_rows
    rows_a = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    keys_a = np.concatenate(keys) if keys else np.zeros(0, np.int64)
    save_arrays(_hits_file(outdir, i), rows=rows_a, keys=keys_a)
    return np.unique(keys_a, return_counts=True)


def contaminated_rows(hits: dict, common: np.ndarray, n_of_key) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, chosen key, number of non-common matches) per contaminated row of one shard."""
    rows, keys = hits["rows"], hits["keys"]
    keep = ~np.isin(keys, common)
    rows, keys = rows[keep], keys[keep]
    if not len(rows):
        z = np.zeros(0, np.int64)
        return z, z, z
    # most specific match first: longest n, then the smallest key (deterministic)
    order = np.lexsort((keys, -n_of_key(keys), rows))
    rows, keys = rows[order], keys[order]
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    counts = np.diff(np.r_[starts, len(rows)])
    return rows[starts], keys[starts], counts


def contaminated_shard(item: tuple[int, Location], *, index: Shared, common: np.ndarray, outdir: Location) -> int:
    """One shard's contaminated rows with their most specific match; returns how many."""
    i, shard = item
    idx = index.get()
    rows, keys, n_matches = contaminated_rows(load_arrays(_hits_file(outdir, i), "decontaminate_v1"), common,
                                              lambda k: idx.ns[k >> 40])
    ids = read_table(shard, ["id"]).column("id").take(pa.array(rows, pa.int64())).to_pylist() if len(rows) else []
    out: dict[str, list] = {k: [] for k in ("benchmark", "item", "ngram", "n")}
    for key in keys.tolist():
        d = idx.describe(key)
        for k in out:
            out[k].append(d[k])
    write_table(outdir.join(f"contaminated-{i:05d}.parquet"), pa.table({
        "id": pa.array(ids, pa.string()), "benchmark": pa.array(out["benchmark"], pa.string()),
        "item": pa.array(out["item"], pa.string()), "ngram": pa.array(out["ngram"], pa.string()),
        "n": pa.array(out["n"], pa.int32()), "n_matches": pa.array(n_matches.tolist(), pa.int32())}))
    return len(ids)


def common_ngrams(index: NgramIndex, counts: list[tuple[np.ndarray, np.ndarray]], threshold: int) -> np.ndarray:
    """Packed keys of the indexed n-grams found in >= `threshold` documents over all shards: one
    counter per indexed n-gram, so the driver's memory follows the index, not the corpus."""
    base = np.r_[0, np.cumsum([len(h) for h in index.hashes])].astype(np.int64)
    totals = np.zeros(base[-1], np.int64)
    for keys, n_docs in counts:
        np.add.at(totals, base[keys >> 40] + (keys & ((1 << 40) - 1)), n_docs)
    flat = np.flatnonzero(totals >= threshold)
    k = np.searchsorted(base, flat, side="right") - 1
    return index.key(k, flat - base[k])


@register
class Decontaminate(GlobalStage):
    """Drops documents sharing an n-gram with a benchmark item (`contaminated:<benchmark>`)."""

    name = "decontaminate_v1"
    Config = DecontamConfig

    def describe(self) -> dict:
        folder = benchmarks_dir(self.config.benchmarks_dir)
        return {**super().describe(), "data": {n: data_info(n, folder) for n in self.config.benchmarks}}

    def build(self, shards: list, *, workdir, tasks: TaskMap) -> list[Location]:
        cfg = self.config
        shards = [as_location(s) for s in shards]
        outdir = as_location(workdir).join("decontam")
        outdir.mkdir()
        index, data, entry = build_index(cfg)
        log.info("decontam index: %d n-grams from %d items", index.n_ngrams, len(index.item_ids))
        if entry is not None:  # the workers read the cache file itself: no 74 MB copy written (and fsynced) per run
            saved, load = Location.parse(str(entry.path)), partial(load_from_cache, cfg=cfg, entry=entry)
        else:  # the cache could not be written: a copy in the run's work folder, as before
            saved, load = index.save(outdir.join("index.npz"), data), NgramIndex.load
        del data
        shared = tasks.broadcast(index, saved=saved, load=load)
        counts = tasks.map(partial(collisions_shard, cfg=cfg, index=shared, outdir=outdir), list(enumerate(shards)))
        common = common_ngrams(index, counts, cfg.common_threshold)
        del counts
        if len(common):
            log.info("decontam: %d benchmark n-grams are common usage (>= %d documents), ignored",
                     len(common), cfg.common_threshold)
        tasks.map(partial(contaminated_shard, index=shared, common=common, outdir=outdir), list(enumerate(shards)))
        return [outdir.join(f"contaminated-{i:05d}.parquet") for i in range(len(shards))]

    def bind(self, state) -> Stage:
        return ApplyDecontam(self.config, state)

    def build_fixed(self) -> None:
        build_index(self.config)


_ARTIFACT_CACHE: dict[tuple, pa.Table] = {}


def _artifact(state, key: tuple) -> pa.Table:
    """The contaminated rows of every shard, in shard order (a legacy state is one path). `key` is
    `drop_lists_key(state)`: a build redone at the same paths is not served from the cache."""
    locs = [as_location(s) for s in (state if isinstance(state, (list, tuple)) else [state])]
    if key not in _ARTIFACT_CACHE:
        _ARTIFACT_CACHE.clear()
        _ARTIFACT_CACHE[key] = pa.concat_tables([read_table(loc, what="decontaminate_v1") for loc in locs]
                                                ).combine_chunks()
    return _ARTIFACT_CACHE[key]


class ApplyDecontam(Filter):
    name = "decontaminate_v1"
    Config = DecontamConfig

    def __init__(self, config, state):
        super().__init__(config)
        self.state = state
        self._state_key = None  # taken once per bound stage, as DropIds does

    def _matches(self, table: pa.Table) -> tuple[pa.Table, pa.Array]:
        if self._state_key is None:
            self._state_key = drop_lists_key(self.state)
        art = _artifact(self.state, self._state_key)
        return art, pc.index_in(table.column("id"), value_set=art.column("id"))

    def reasons(self, table: pa.Table) -> pa.Array:
        art, at = self._matches(table)
        bench = pc.take(art.column("benchmark"), at)
        return pc.binary_join_element_wise(pa.scalar("contaminated"), bench, ":")

    def apply(self, table: pa.Table) -> StageResult:
        art, at = self._matches(table)
        reasons = pc.binary_join_element_wise(pa.scalar("contaminated"), pc.take(art.column("benchmark"), at), ":")
        result = drop_by_reason(self.name, table, reasons)
        if result.rejects is not None:
            hit = pc.drop_null(at)
            rows = pc.take(art, hit).to_pylist()
            detail = [json.dumps({k: r[k] for k in ("benchmark", "item", "ngram", "n", "n_matches")},
                                 ensure_ascii=False) for r in rows]
            result.rejects = with_columns(result.rejects, {"drop_detail": pa.array(detail, pa.string())})
        return result
