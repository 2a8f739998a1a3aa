"""Exact dedup by a hash of normalised text: a global stage with a build/apply split.

build: every shard in parallel hashes its rows (64-bit, vectorised); the driver keeps the first
occurrence of each hash in (shard, row) order -- one `np.unique`, 8 bytes per row -- so the kept
row is deterministic whatever ran where. The ids to drop go to a Parquet file under the workdir;
the state is its path.
apply: drops rows whose id is listed, as `duplicate`. Null text is never a duplicate.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..config import require
from ..dedup.drops import DropIds, check_columns, write_drop_ids
from ..dedup.exact import first_occurrence_drops, hash_keys, ids_at
from ..registry import register
from ..stage import GlobalStage, Stage, TaskMap


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


def _hash_shard(path: str, cfg: ExactDedupConfig):
    check_columns(path, ["id", cfg.field], "exact_dedup_v1")
    table = pq.read_table(path, columns=["id", cfg.field])
    hashes, valid = hash_keys(normalised(table.column(cfg.field), cfg))
    return hashes, valid, table.column("id")


class ApplyExactDedup(DropIds):
    name = "exact_dedup_v1"
    Config = ExactDedupConfig
    reason = "duplicate"


@register
class ExactDedup(GlobalStage):
    """Exact duplicates of normalised text (first occurrence kept); drops `duplicate`."""

    name = "exact_dedup_v1"
    Config = ExactDedupConfig

    def build(self, shards: list[str], *, workdir: str, tasks: TaskMap) -> str:
        per_shard = tasks.map(partial(_hash_shard, cfg=self.config), shards)
        drops = first_occurrence_drops([h for h, _, _ in per_shard], [v for _, v, _ in per_shard])
        os.makedirs(workdir, exist_ok=True)
        return write_drop_ids(os.path.join(workdir, "exact_duplicates.parquet"),
                              ids_at([i for _, _, i in per_shard], drops))

    def bind(self, state: str) -> Stage:
        return ApplyExactDedup(self.config, state)
