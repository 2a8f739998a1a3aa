"""The generator stage kind: seed rows in, zero or more generated rows per seed out.

A subclass implements `expand(table) -> (rows, dropped)`: `rows` are dicts matching `schema`, and
`dropped` pairs a seed-row index with the reason nothing (or not everything) came from it, so the
manifest counts every failed generation by reason and the rejects show the seed; a third element is
the evidence that decided the drop (a dict: the backend's error, the parse failure, the measured value
and its limit, the rejected reply clipped), written to the rejects' `drop_detail` as short JSON.
Generated rows carry the provenance columns of `synth.backends.PROVENANCE_SCHEMA`.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

import pyarrow as pa

from corpus.stage import DROP_DETAIL, DROP_REASON, DROP_STAGE, Stage, StageResult, evidence, with_columns
from manifests.manifest import StageStats

from synth.backends import PROVENANCE_SCHEMA

PROVENANCE_FIELDS = list(PROVENANCE_SCHEMA)
CLIP_CHARS = 160  # quoted text in a drop_detail (a reply, a question) is cut to this, so a detail stays short


def clip(text: str | None, limit: int = CLIP_CHARS) -> str | None:
    """Quoted text for a drop_detail: at most `limit` characters, an ellipsis marking a cut."""
    if text is None or len(text) <= limit:
        return text
    return text[:limit - 1] + "\u2026"


def detail(item) -> str | None:
    """One drop's evidence as `drop_detail` JSON: a dict goes through `corpus.stage.evidence` with its
    strings clipped; a bare string is a rejected reply and is stored as `{"reply": ...}`."""
    if item is None:
        return None
    if isinstance(item, str):
        item = {"reply": item}
    return evidence([{k: clip(v) if isinstance(v, str) else v for k, v in item.items()}])[0]


def schema_with_provenance(*fields: pa.Field) -> pa.Schema:
    return pa.schema([pa.field("id", pa.string()), pa.field("source", pa.string()), *fields, *PROVENANCE_FIELDS])


class Generator(Stage):
    schema: ClassVar[pa.Schema]

    def reads(self) -> tuple[str, ...]:
        """Nothing for the preflight to check: a generator reads the seed columns its kind names (tools,
        conversations, problem, ...) and says which one is missing in its own error."""
        return ()

    @abstractmethod
    def expand(self, table: pa.Table) -> tuple[list[dict], list[tuple]]:
        """(rows, dropped) with dropped entries (seed index, reason, evidence dict)."""

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
                DROP_DETAIL: pa.array([detail(e[2]) if len(e) > 2 else None for e in dropped], pa.string()),
            })
        stats = StageStats(self.name, rows_in=table.num_rows, rows_out=out.num_rows, dropped=counts,
                           counters={"generated": out.num_rows})
        return StageResult(out, stats, rejects)
