"""A global stage that keeps the first row per normalised key, in (shard, row) order.

build, driver-light (the driver only sees row and drop counts):
  1. map over shards: hash each row's key (64-bit, vectorised) and split the (key, row, id) triples
     by a hash of the key into P partitions: `<workdir>/<stage>/keys-PPPP/SSSSS.parquet`;
  2. map over partitions: read the partition's files in shard order (rows inside a file are in row
     order), keep the first occurrence of each key -- one `np.unique` -- and write the ids of the
     others to `<workdir>/<stage>/drops-PPPP.parquet`.
Every row with a given key lands in the same partition, so "first in (shard, row) order" is decided
there exactly as over the whole corpus: the result does not depend on P, on the workers or on where
a task ran. The state is the list of drop files (Locations on the storage filesystem).
apply: the `Apply` filter drops listed ids with its reason. Null keys are never duplicates.
Subclasses say how a key column is normalised (exact text, URLs, ...).
"""

from __future__ import annotations

from abc import abstractmethod
from functools import partial
from typing import ClassVar

import numpy as np
import pyarrow as pa

from manifests.storage import Location

from ..stage import GlobalStage, Stage, TaskMap
from .drops import DropIds, check_columns, write_drop_ids
from .exact import first_occurrence_drops, hash_keys
from .spill import as_location, n_partitions, partition_of, read_table, split_by_partition, write_table


def _key_file(outdir: Location, part: int, shard: int) -> Location:
    return outdir.join(f"keys-{part:04d}", f"{shard:05d}.parquet")


def _hash_shard(item: tuple[int, Location], *, stage: "FirstOccurrenceDedup", outdir: Location,
                partitions: int) -> int:
    """Map side: this shard's (key, row, id) triples, one file per partition; returns its row count."""
    index, shard = item
    field = stage.config.field
    check_columns(shard, ["id", field], stage.name)
    table = read_table(shard, ["id", field])
    hashes, valid = hash_keys(stage.normalise(table.column(field)))
    rows = np.flatnonzero(valid)
    keys = hashes[rows]
    ids = table.column("id")
    for p, sel in enumerate(split_by_partition(partition_of(keys, partitions), partitions)):
        write_table(_key_file(outdir, p, index), pa.table({
            "key": pa.array(keys[sel], pa.uint64()), "row": pa.array(rows[sel], pa.int64()),
            "id": ids.take(pa.array(rows[sel], pa.int64()))}))
    return table.num_rows


def _first_in_partition(part: int, *, outdir: Location, n_shards: int, name: str) -> int:
    """Reduce side: drop every row of this partition whose key appeared earlier; returns the count."""
    tables = [read_table(_key_file(outdir, part, s), what=name) for s in range(n_shards)]
    keys = [t.column("key").to_numpy() for t in tables]
    drops, kept = first_occurrence_drops(keys, [np.ones(len(k), bool) for k in keys])
    ids = pa.chunked_array([c for t in tables for c in t.column("id").chunks], pa.string())
    write_drop_ids(outdir.join(f"drops-{part:04d}.parquet"), ids.take(pa.array(drops, pa.int64())),
                   {"kept_id": ids.take(pa.array(kept, pa.int64()))})
    return len(drops)


class FirstOccurrenceDedup(GlobalStage):
    Apply: ClassVar[type[DropIds]]
    artifact: ClassVar[str]  # folder of this stage's state under the workdir

    @abstractmethod
    def normalise(self, values: pa.ChunkedArray) -> pa.ChunkedArray:
        """The key each row is deduplicated on."""

    def build(self, shards: list, *, workdir, tasks: TaskMap) -> list[Location]:
        shards = [as_location(s) for s in shards]
        outdir = as_location(workdir).join(self.artifact)
        outdir.mkdir()
        parts = n_partitions(tasks, len(shards))
        tasks.map(partial(_hash_shard, stage=self, outdir=outdir, partitions=parts), list(enumerate(shards)))
        tasks.map(partial(_first_in_partition, outdir=outdir, n_shards=len(shards), name=self.name), range(parts))
        return [outdir.join(f"drops-{p:04d}.parquet") for p in range(parts)]

    def bind(self, state) -> Stage:
        return self.Apply(self.config, state)
