"""The generator stage kind: seed rows in, zero or more generated rows per seed out.

A subclass implements `expand(table) -> (rows, dropped)`: `rows` are dicts matching `schema`, and
`dropped` pairs a seed-row index with the reason nothing (or not everything) came from it, so the
manifest counts every failed generation by reason and the rejects show the seed; an optional third
element is the rejected generation itself, shown in the rejects as `drop_detail` for audit. Generated rows
carry the provenance columns of `synth.backends.PROVENANCE_SCHEMA`.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

import pyarrow as pa

from corpus.stage import DROP_REASON, DROP_STAGE, Stage, StageResult, with_columns
from manifests.manifest import StageStats

from synth.backends import PROVENANCE_SCHEMA

PROVENANCE_FIELDS = list(PROVENANCE_SCHEMA)


def schema_with_provenance(*fields: pa.Field) -> pa.Schema:
    return pa.schema([pa.field("id", pa.string()), pa.field("source", pa.string()), *fields, *PROVENANCE_FIELDS])


class Generator(Stage):
    schema: ClassVar[pa.Schema]

    @abstractmethod
    def expand(self, table: pa.Table) -> tuple[list[dict], list[tuple]]:
        """(rows, dropped) with dropped entries (seed index, reason) or (seed index, reason, detail)."""

    def apply(self, table: pa.Table) -> StageResult:
        rows, dropped = self.expand(table)
        out = pa.Table.from_pylist(rows, schema=self.schema)
        counts: dict[str, int] = {}
        for entry in dropped:
            counts[entry[1]] = counts.get(entry[1], 0) + 1
        rejects = None
        if dropped:
            rejects = table.take([e[0] for e in dropped])
            rejects = with_columns(rejects, {
                DROP_REASON: pa.array([e[1] for e in dropped], pa.string()),
                DROP_STAGE: pa.array([self.name] * len(dropped), pa.string()),
                "drop_detail": pa.array([e[2] if len(e) > 2 else None for e in dropped], pa.string()),
            })
        stats = StageStats(self.name, rows_in=table.num_rows, rows_out=out.num_rows, dropped=counts,
                           counters={"generated": out.num_rows})
        return StageResult(out, stats, rejects)
