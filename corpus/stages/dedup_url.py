"""URL dedup: one row per normalised URL (the first in shard, row order), a global stage.

The normalisation (corpus/dedup/urls.py) folds scheme, host case, `www.`, default ports,
fragments, trailing slashes and tracking parameters. Rows without a URL are kept. Same build/apply
split as exact_dedup_v1; drops `duplicate_url`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial

import pyarrow.parquet as pq

from ..config import require
from ..dedup.drops import DropIds, check_columns, write_drop_ids
from ..dedup.exact import first_occurrence_drops, hash_keys, ids_at
from ..dedup.urls import normalise_urls
from ..registry import register
from ..stage import GlobalStage, Stage, TaskMap


@dataclass(frozen=True, kw_only=True)
class UrlDedupConfig:
    field: str = "url"

    def __post_init__(self):
        require(bool(self.field), "field must name the URL column (e.g. url)")


def _hash_shard(path: str, cfg: UrlDedupConfig):
    check_columns(path, ["id", cfg.field], "url_dedup_v1")
    table = pq.read_table(path, columns=["id", cfg.field])
    hashes, valid = hash_keys(normalise_urls(table.column(cfg.field)))
    return hashes, valid, table.column("id")


class ApplyUrlDedup(DropIds):
    name = "url_dedup_v1"
    Config = UrlDedupConfig
    reason = "duplicate_url"


@register
class UrlDedup(GlobalStage):
    """One row per normalised URL (first kept); drops `duplicate_url`."""

    name = "url_dedup_v1"
    Config = UrlDedupConfig

    def build(self, shards: list[str], *, workdir: str, tasks: TaskMap) -> str:
        per_shard = tasks.map(partial(_hash_shard, cfg=self.config), shards)
        drops = first_occurrence_drops([h for h, _, _ in per_shard], [v for _, v, _ in per_shard])
        os.makedirs(workdir, exist_ok=True)
        return write_drop_ids(os.path.join(workdir, "url_duplicates.parquet"),
                              ids_at([i for _, _, i in per_shard], drops))

    def bind(self, state: str) -> Stage:
        return ApplyUrlDedup(self.config, state)
