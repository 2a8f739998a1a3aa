"""A global stage that keeps the first row per normalised key, in (shard, row) order.

build: every shard in parallel hashes its keys (64-bit, vectorised); the driver keeps the first
occurrence of each hash -- one `np.unique`, 8 bytes per row -- so the kept row is deterministic
whatever ran where. The ids to drop go to a Parquet file under the workdir; the state is its path.
apply: the `Apply` filter drops listed ids with its reason. Null keys are never duplicates.
Subclasses say how a key column is normalised (exact text, URLs, ...).
"""

from __future__ import annotations

import os
from abc import abstractmethod
from functools import partial
from typing import ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from ..stage import GlobalStage, Stage, TaskMap
from .drops import DropIds, check_columns, write_drop_ids
from .exact import first_occurrence_drops, hash_keys, ids_at


def _hash_shard(path: str, stage: "FirstOccurrenceDedup"):
    field = stage.config.field
    check_columns(path, ["id", field], stage.name)
    table = pq.read_table(path, columns=["id", field])
    hashes, valid = hash_keys(stage.normalise(table.column(field)))
    return hashes, valid, table.column("id")


class FirstOccurrenceDedup(GlobalStage):
    Apply: ClassVar[type[DropIds]]
    artifact: ClassVar[str]  # file name of the drop list under the workdir

    @abstractmethod
    def normalise(self, values: pa.ChunkedArray) -> pa.ChunkedArray:
        """The key each row is deduplicated on."""

    def build(self, shards: list[str], *, workdir: str, tasks: TaskMap) -> str:
        per_shard = tasks.map(partial(_hash_shard, stage=self), shards)
        drops = first_occurrence_drops([h for h, _, _ in per_shard], [v for _, v, _ in per_shard])
        os.makedirs(workdir, exist_ok=True)
        return write_drop_ids(os.path.join(workdir, self.artifact), ids_at([i for _, _, i in per_shard], drops))

    def bind(self, state: str) -> Stage:
        return self.Apply(self.config, state)
