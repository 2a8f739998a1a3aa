"""Decontamination against evaluation benchmarks: a two-pass global stage.

build (through the executor's TaskMap):
  1. the driver loads the benchmarks (corpus/decontam/benchmarks.py) and builds the n-gram index
     (corpus/decontam/index.py), saved under `<workdir>/decontam/index.npz`;
  2. every shard in parallel: the (document, benchmark n-gram) collisions of its rows, spilled to
     `hits-NNNNN.npz`; the task returns only how many documents hold each colliding n-gram;
  3. the driver sums those counts over the whole corpus: an n-gram found in >= `common_threshold`
     documents is common usage ("of the following", a famous quote), not contamination, and is
     ignored (the AFM report: 1000);
  4. every document with a remaining collision is contaminated; its most specific match (longest
     n) is recorded: benchmark, item id, the n-gram. Written to `contaminated.parquet`; the state
     is that path.
apply: drops those ids with reason `contaminated:<benchmark>` and a JSON `drop_detail`
({benchmark, item, ngram, n, n_matches}) on the rejects.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from dataclasses import field as dc_field
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from manifests.config import require
from ..decontam.benchmarks import DEFAULT_BENCHMARKS, READERS, benchmarks_dir, check_available, data_info, load_items
from ..decontam.index import NgramIndex
from ..dedup.drops import check_columns
from ..dedup.ngrams import tokenize
from ..registry import register
from ..stage import Filter, GlobalStage, Stage, StageResult, TaskMap, drop_by_reason, with_columns

log = logging.getLogger("cidermill.decontam")
_INDEX_CACHE: dict[str, NgramIndex] = {}


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


def load_index(path: str) -> NgramIndex:
    if path not in _INDEX_CACHE:
        _INDEX_CACHE.clear()
        _INDEX_CACHE[path] = NgramIndex.load(path)
    return _INDEX_CACHE[path]


def build_index(cfg: DecontamConfig) -> NgramIndex:
    folder = benchmarks_dir(cfg.benchmarks_dir)
    items = {name: load_items(name, folder) for name in cfg.benchmarks}
    log.info("decontam benchmarks: %s", ", ".join(f"{n} ({len(v)} items, {src})" for (n, v), src in
                                                   zip(items.items(), check_available(items, folder).values())))
    return NgramIndex.build(items, min_n=cfg.min_n, max_n=cfg.max_n)


def collisions_shard(item: tuple[int, str], *, cfg: DecontamConfig, index_path: str, outdir: str):
    """Spill (row, n-gram key) collisions of one shard; return (keys, document counts)."""
    i, path = item
    check_columns(path, ["id", cfg.field], "decontaminate_v1")
    index = load_index(index_path)
    rows, keys = [], []
    offset = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=cfg.batch_rows, columns=[cfg.field]):
        doc, k, pos = index.find(tokenize(batch.column(0)))
        rows.append(doc + offset)
        keys.append(index.key(k, pos))
        offset += batch.num_rows
    rows_a = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    keys_a = np.concatenate(keys) if keys else np.zeros(0, np.int64)
    np.savez(os.path.join(outdir, f"hits-{i:05d}.npz"), rows=rows_a, keys=keys_a)
    return np.unique(keys_a, return_counts=True)


def contaminated_rows(hits_path: str, common: np.ndarray, n_of_key) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, chosen key, number of non-common matches) per contaminated row of one shard."""
    z = np.load(hits_path)
    rows, keys = z["rows"], z["keys"]
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


@register
class Decontaminate(GlobalStage):
    """Drops documents sharing an n-gram with a benchmark item (`contaminated:<benchmark>`)."""

    name = "decontaminate_v1"
    Config = DecontamConfig

    def describe(self) -> dict:
        folder = benchmarks_dir(self.config.benchmarks_dir)
        return {**super().describe(), "data": {n: data_info(n, folder) for n in self.config.benchmarks}}

    def build(self, shards: list[str], *, workdir: str, tasks: TaskMap) -> str:
        cfg = self.config
        outdir = os.path.join(workdir, "decontam")
        os.makedirs(outdir, exist_ok=True)
        index = build_index(cfg)
        index_path = index.save(os.path.join(outdir, "index.npz"))
        log.info("decontam index: %d n-grams from %d items", index.n_ngrams, len(index.item_ids))
        counts = tasks.map(partial(collisions_shard, cfg=cfg, index_path=index_path, outdir=outdir),
                           list(enumerate(shards)))
        all_keys = np.concatenate([k for k, _ in counts]) if counts else np.zeros(0, np.int64)
        all_counts = np.concatenate([c for _, c in counts]) if counts else np.zeros(0, np.int64)
        uniq, inverse = np.unique(all_keys, return_inverse=True)
        totals = np.bincount(inverse, weights=all_counts, minlength=len(uniq)).astype(np.int64)
        common = uniq[totals >= cfg.common_threshold]
        if len(common):
            log.info("decontam: %d benchmark n-grams are common usage (>= %d documents), ignored",
                     len(common), cfg.common_threshold)
        n_values = index.ns
        n_of_key = lambda keys: n_values[keys >> 40]  # noqa: E731
        out: dict[str, list] = {k: [] for k in ("id", "benchmark", "item", "ngram", "n", "n_matches")}
        for i, path in enumerate(shards):
            rows, keys, n_matches = contaminated_rows(os.path.join(outdir, f"hits-{i:05d}.npz"), common, n_of_key)
            if not len(rows):
                continue
            ids = pq.read_table(path, columns=["id"]).column("id").take(pa.array(rows)).to_pylist()
            for rid, key, m in zip(ids, keys.tolist(), n_matches.tolist()):
                d = index.describe(key)
                out["id"].append(rid)
                for k in ("benchmark", "item", "ngram", "n"):
                    out[k].append(d[k])
                out["n_matches"].append(m)
        table = pa.table({"id": pa.array(out["id"], pa.string()), "benchmark": pa.array(out["benchmark"], pa.string()),
                          "item": pa.array(out["item"], pa.string()), "ngram": pa.array(out["ngram"], pa.string()),
                          "n": pa.array(out["n"], pa.int32()), "n_matches": pa.array(out["n_matches"], pa.int32())})
        path = os.path.join(outdir, "contaminated.parquet")
        pq.write_table(table, path)
        return path

    def bind(self, state: str) -> Stage:
        return ApplyDecontam(self.config, state)


_ARTIFACT_CACHE: dict[str, pa.Table] = {}


def _artifact(path: str) -> pa.Table:
    if path not in _ARTIFACT_CACHE:
        _ARTIFACT_CACHE.clear()
        _ARTIFACT_CACHE[path] = pq.read_table(path).combine_chunks()
    return _ARTIFACT_CACHE[path]


class ApplyDecontam(Filter):
    name = "decontaminate_v1"
    Config = DecontamConfig

    def __init__(self, config, path: str):
        super().__init__(config)
        self.path = path

    def _matches(self, table: pa.Table) -> tuple[pa.Table, pa.Array]:
        art = _artifact(self.path)
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
