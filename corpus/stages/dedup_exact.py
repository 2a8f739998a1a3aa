"""Exact dedup by a hash of normalised text: a global stage with a build/apply split.

build: every shard in parallel hashes its rows to (hash, shard index, row index); the first
occurrence in (shard, row) order wins, so the kept row is deterministic whatever ran where.
Memory is 16 bytes per row of hash plus the ids of the rows to drop.
apply: drops rows whose id is in the drop set, as `duplicate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..config import require
from ..registry import register
from ..stage import Filter, GlobalStage, Stage, TaskMap


@dataclass(frozen=True, kw_only=True)
class ExactDedupConfig:
    field: str = "text"
    lowercase: bool = True
    collapse_whitespace: bool = True

    def __post_init__(self):
        require(bool(self.field), "field must name a string column")


def normalised(values: pa.ChunkedArray, cfg: ExactDedupConfig) -> pa.ChunkedArray:
    if cfg.lowercase:
        values = pc.utf8_lower(values)
    if cfg.collapse_whitespace:
        values = pc.utf8_trim_whitespace(pc.replace_substring_regex(values, r"\s+", " "))
    return values


def _hash64(values: pa.ChunkedArray) -> np.ndarray:
    import xxhash

    return np.array([xxhash.xxh3_64_intdigest(v.encode()) if v is not None else 0
                     for v in values.to_pylist()], dtype=np.uint64)


def _hash_shard(path: str, cfg: ExactDedupConfig) -> tuple[np.ndarray, list[str]]:
    table = pq.read_table(path, columns=["id", cfg.field])
    return _hash64(normalised(table.column(cfg.field), cfg)), table.column("id").to_pylist()


class ApplyExactDedup(Filter):
    name = "exact_dedup_v1"
    Config = ExactDedupConfig

    def __init__(self, config, drop_ids: frozenset[str]):
        super().__init__(config)
        self.drop_ids = pa.array(sorted(drop_ids), pa.string())

    def reasons(self, table: pa.Table) -> pa.Array:
        dup = pc.is_in(table.column("id"), value_set=self.drop_ids)
        return pc.if_else(dup, pa.scalar("duplicate"), pa.scalar(None, pa.string()))


@register
class ExactDedup(GlobalStage):
    name = "exact_dedup_v1"
    Config = ExactDedupConfig

    def build(self, shards: list[str], *, workdir: str, tasks: TaskMap) -> frozenset[str]:
        per_shard = tasks.map(partial(_hash_shard, cfg=self.config), shards)
        seen: set[int] = set()
        drop: set[str] = set()
        for hashes, ids in per_shard:  # shard order, then row order: first occurrence is kept
            for h, rid in zip(hashes.tolist(), ids):
                if h in seen:
                    drop.add(rid)
                else:
                    seen.add(h)
        return frozenset(drop)

    def bind(self, state: frozenset[str]) -> Stage:
        return ApplyExactDedup(self.config, state)
