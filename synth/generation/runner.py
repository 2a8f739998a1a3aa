"""Run a generator's stages in process on a small seed table and publish the result.

Generators are stages (they also run under the pipeline executors); this is the short path the
demo, benchmarks and tests use: seed table in, stages in order, one dataset version out with a
manifest (stage stats, drops by reason, throughput and the LLM used in `extra`), and the dropped
rows as `<name>.rejects`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import pyarrow as pa

from corpus.executors.task import apply_stages
from corpus.stage import Stage
from manifests.catalog import Catalog
from manifests.dataset import DatasetVersion
from manifests.manifest import PipelineInfo, StageStats, code_revision, config_hash


@dataclass
class GeneratorRun:
    version: DatasetVersion
    rejects: DatasetVersion | None
    stats: list[StageStats]
    seconds: float
    seeds_in: int

    @property
    def rows_out(self) -> int:
        return self.version.manifest.rows

    @property
    def items_per_s(self) -> float:
        return self.rows_out / self.seconds if self.seconds else 0.0


def run_stages(table: pa.Table, stages: list[Stage]) -> tuple[pa.Table, list[StageStats], list[pa.Table]]:
    """Seed table through the stages in process, by the executor's own stage loop (corpus/executors/task.py)."""
    stats = [StageStats(s.name) for s in stages]
    rejects: list[pa.Table] = []
    table = apply_stages(table, stages, stats, on_rejects=lambda r: rejects.append(r) if r.num_rows else None)
    return table, stats, rejects


def publish_run(root: str | Catalog, name: str, table: pa.Table, stages: list[Stage], stats: list[StageStats],
                rejects: list[pa.Table], *, extra: dict | None = None, rejects_name: str | None = None,
                rejects_view: Callable[[pa.Table], pa.Table] | None = None) -> tuple[DatasetVersion, DatasetVersion | None]:
    """The one publish path of in-process synth runs: the kept rows with the stages' descriptions, stats and
    code revision, then the rejects (each stage's rows through `rejects_view`) as a child version."""
    described = [s.describe() for s in stages]
    pipeline = PipelineInfo(name=name, stages=described, config={"stages": described},
                            code_revision=code_revision(), config_sha256=config_hash(described))
    catalog = root if isinstance(root, Catalog) else Catalog(root)
    if table.num_rows == 0:
        _nothing_kept(catalog, name, pipeline, stats, rejects, rejects_name=rejects_name, rejects_view=rejects_view)
    version = catalog.write_table(name, table, pipeline=pipeline, stats=stats, extra=extra or {}, schema=table.schema)
    rej = None
    if rejects:
        merged = pa.concat_tables([(rejects_view or _strings)(r) for r in rejects], promote_options="permissive")
        rej = catalog.write_table(rejects_name or f"{name}.rejects", merged, pipeline=pipeline,
                                  parents=[version.version_id])
    return version, rej


def _nothing_kept(catalog: Catalog, name: str, pipeline: PipelineInfo, stats: list[StageStats],
                  rejects: list[pa.Table], *, rejects_name, rejects_view) -> None:
    """As a pipeline run that keeps nothing (corpus/executors/base.py): publish the rejects alone, no empty
    version (a dead backend used to publish a 0-row version and exit 0), and stop with NothingKept (exit 1)."""
    from corpus.executors.base import NothingKept

    rej = None
    if rejects:
        merged = pa.concat_tables([(rejects_view or _strings)(r) for r in rejects], promote_options="permissive")
        rej = catalog.write_table(rejects_name or f"{name}.rejects", merged, pipeline=pipeline, stats=stats)
    rows_in = stats[0].rows_in if stats else 0
    where = f"; the dropped rows are in {rej.name}@{rej.version_id[:12]}" if rej else ""
    raise NothingKept(f"{name}: kept no rows of {rows_in:,} seed rows, so no version was published{where} "
                      "(see the per-stage table for why)", stats=stats, rejects=rej, errors=[])


def run_generator(
    root: str, name: str, seeds: pa.Table, stages: list[Stage], *, extra: dict | None = None,
) -> GeneratorRun:
    start = time.perf_counter()
    out, stats, rejects = run_stages(seeds, stages)
    seconds = time.perf_counter() - start
    facts = {"seconds": round(seconds, 3), "seed_rows": seeds.num_rows, "rows_out": out.num_rows,
             "items_per_s": round(out.num_rows / seconds, 4) if seconds else None, **(extra or {})}
    version, rej = publish_run(root, name, out, stages, stats, rejects, extra=facts)
    return GeneratorRun(version, rej, stats, seconds, seeds.num_rows)


def _strings(t: pa.Table) -> pa.Table:
    """Rejects from different stages have different columns; keep them readable side by side."""
    return pa.table({n: t.column(n).cast(pa.string()) if not pa.types.is_nested(t.schema.field(n).type)
                     else pa.array([str(v) for v in t.column(n).to_pylist()]) for n in t.schema.names})
