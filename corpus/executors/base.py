"""What every executor shares: planning passes, binding global stages, the manifest, publishing.

A subclass supplies `run_tasks(specs)` (and a TaskMap for global builds); everything that decides
the output bytes lives here, so the local and Ray executors write the same versions.
"""

from __future__ import annotations

import logging
import pickle
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from manifests.catalog import Catalog, utc_now
from manifests.dataset import DatasetVersion
from manifests.errors import FatalError
from manifests.hashing import in_background
from manifests.locks import Lock
from manifests.manifest import Manifest, PipelineInfo, StageStats, code_revision, config_hash, version_id_of
from manifests.storage import Location

from ..pipeline import Pipeline
from ..preflight import preflight
from ..readers import InputFile
from ..readers.base import location_digest
from ..stage import GlobalStage, Stage, TaskMap
from .finish import enforce_unique_ids, output_schema, require_outputs
from .task import READ_STAGE, REJECTS_SCHEMA, TaskResult, TaskSpec, _one_line

log = logging.getLogger("cidermill.executor")


@dataclass
class RunOutcome:
    version: DatasetVersion
    rejects: DatasetVersion | None
    stats: list[StageStats]
    errors: list[dict]
    tasks_run: int
    tasks_resumed: int
    seconds: float
    extra: dict = field(default_factory=dict)


class NothingKept(FatalError):
    """A run dropped every row; its rejects are published (if on) and no version is."""

    def __init__(self, message: str, *, stats: list[StageStats], rejects: DatasetVersion | None, errors: list[dict]):
        super().__init__(message)
        self.stats = stats
        self.rejects = rejects
        self.errors = errors


class Executor(ABC):
    kind = "abstract"

    def __init__(self, pipeline: Pipeline, *, progress: bool = True):
        self.pipeline = pipeline
        self.show_progress = progress

    @abstractmethod
    def run_tasks(self, specs: list[TaskSpec], stage_names: list[str]) -> list[TaskResult]:
        """Run every spec (in any order); return results ordered by spec index."""

    @abstractmethod
    def task_map(self) -> TaskMap:
        ...

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------------------------
    def run(self) -> RunOutcome:
        """Run the pipeline into a new version. Holds the run key's lock throughout, so a second
        identical run waits (saying who holds it) and then finds the version already published."""
        p = self.pipeline
        start = time.perf_counter()
        catalog = p.catalog()
        inputs = p.inputs()
        preflight(p, inputs)
        run_key = p.run_key(inputs)
        try:
            with Lock(catalog.root, f"run-{p.name}-{run_key[:16]}", what=f"run {p.name!r} (run key {run_key[:16]})",
                      wait_s=p.executor.lock_wait_s):
                return self._run_locked(catalog, inputs, run_key, start)
        except OSError as exc:  # a full disk, a read-only root: one line; tasks left no temp files
            raise FatalError(f"pipeline {p.name}: {_one_line(exc)} (data root {catalog.root.uri}); a rerun reuses "
                             "the tasks that finished, for inputs whose bytes are unchanged") from None

    def _run_locked(self, catalog: Catalog, inputs: list[InputFile], run_key: str, start: float) -> RunOutcome:
        p = self.pipeline
        staging = catalog.staging_dir(p.name, run_key)
        staging.mkdir()
        revision = in_background(code_revision)  # two git calls: they run while the tasks do
        passes = p.passes()
        # the versions whose shards are read, as resolved once (a LATEST moved meanwhile changes nothing)
        parents = list(dict.fromkeys(f.version.split("@", 1)[1] for f in inputs if f.version))

        all_stats: dict[str, StageStats] = {}
        errors: list[dict] = []
        results: list[TaskResult] = []
        reject_shards: list = []  # every pass's, in (pass, task) order: learnt from the results, not from a listing
        n_run = n_resumed = 0
        pass_inputs, fmt, options = inputs, p.input.format, p.input.options
        for k, stages in enumerate(passes):
            last = k == len(passes) - 1
            context = _context_of(pass_inputs) if stages and isinstance(stages[0], GlobalStage) else ""
            stages = self._bind_globals(stages, pass_inputs, staging.join(f"pass-{k}"), context)
            shards_dir = staging.join("shards") if last else staging.join(f"pass-{k}", "shards")
            specs = [
                TaskSpec(
                    index=i, input=f, reader_format=fmt, reader_options=options, stages=stages,
                    shards_dir=shards_dir, shards_rel="shards",
                    rejects_dir=staging.join("rejects") if p.output.rejects else None,
                    rejects_prefix=f"p{k}-", marker=staging.join(f"pass-{k}", "tasks", f"{i:05d}.json"),
                    batch_rows=p.executor.batch_rows, target_bytes=p.target_bytes,
                    row_group_rows=p.output.row_group_rows, cast=dict(p.input.cast) if k == 0 else {},
                    max_retries=p.executor.max_task_retries, context=context,
                )
                for i, f in enumerate(pass_inputs)
            ]
            names = ([READ_STAGE] if k == 0 else []) + [s.name for s in stages]
            results = self.run_tasks(specs, names)
            require_outputs(results, shards_dir=shards_dir, rejects_dir=specs[0].rejects_dir if specs else None)
            reject_shards += [s for r in results for s in r.rejects]
            for r in results:
                n_resumed += r.resumed
                n_run += not r.resumed
                errors.extend(r.errors)
                for st in r.stats:
                    if st.name == READ_STAGE and k > 0:
                        continue  # re-reading our own intermediate shards is not a stage
                    all_stats.setdefault(st.name, StageStats(st.name)).merge(st)
            # The next pass reads this pass's shards, in task order.
            pass_inputs = [InputFile(shards_dir.join(s.path.rsplit("/", 1)[-1]), f"pass-{k}/{s.path}",
                                     sha256=s.sha256, rows=s.rows, verify=False)
                           for r in results for s in r.shards]
            fmt, options = "parquet", {}

        schema = output_schema(staging, results)  # one schema per version, or a FatalError naming the input
        results, unique_rejects, unique_stats = enforce_unique_ids(
            staging, results, mode=p.output.unique_ids, rejects=p.output.rejects,
            target_bytes=p.target_bytes, row_group_rows=p.output.row_group_rows)
        if unique_stats is not None:
            all_stats[unique_stats.name] = unique_stats
        stats = list(all_stats.values())
        shards = [s for r in results for s in r.shards]
        info = PipelineInfo(
            name=p.name, stages=[s.describe() for s in p.stages], config=p.canonical(),
            code_revision=revision(), config_sha256=config_hash(p.canonical()),
        )
        reject_shards += unique_rejects
        rejects_manifest = None
        if p.output.rejects and reject_shards:
            rejects_manifest = Manifest(
                name=f"{p.name}.rejects", version_id=version_id_of([s.sha256 for s in reject_shards]),
                shards=reject_shards, schema=REJECTS_SCHEMA, pipeline=info, stats=stats,
                created_at=utc_now(), extra={"kind": "rejects"},
            )
        if not shards:
            self._nothing_kept(catalog, staging, rejects_manifest, stats, errors)
        manifest = Manifest(
            name=p.name, version_id=version_id_of([s.sha256 for s in shards]), shards=shards, schema=schema,
            pipeline=info, parents=parents, stats=stats, errors=errors, created_at=utc_now(),
        )
        version = catalog.publish(staging, manifest, cleanup=True, rejects=rejects_manifest,
                                  lock_wait_s=p.executor.lock_wait_s)
        rejects_version = DatasetVersion(catalog.root.join(rejects_manifest.name, rejects_manifest.version_id)) \
            if rejects_manifest is not None else None
        return RunOutcome(version, rejects_version, stats, errors, n_run, n_resumed,
                          time.perf_counter() - start)

    def _nothing_kept(self, catalog: Catalog, staging: Location, rejects: Manifest | None,
                      stats: list[StageStats], errors: list[dict]) -> None:
        """No row survived: publish the rejects alone, clean up, and stop with exit status 1.

        An empty version is not published: it would look like a successful build to whatever
        reads the name next (a tokenizer, a mixture), which is the mistake to catch early.
        """
        p = self.pipeline
        rejects_version = None
        if rejects is not None:
            rejects_version = catalog.publish(staging, rejects, cleanup=False, lock_wait_s=p.executor.lock_wait_s)
        try:
            staging.delete()
        except OSError as exc:
            log.warning("could not delete %s: %s", staging.uri, exc)
        rows_in = next((s.rows_in for s in stats if s.name == READ_STAGE), 0)
        where = (f"; the dropped rows are in {rejects_version.name}@{rejects_version.version_id[:12]}"
                 if rejects_version else "")
        raise NothingKept(
            f"pipeline {p.name}: kept no rows of {rows_in:,} read, so no version was published{where} "
            "(see the per-stage table for why)", stats=stats, rejects=rejects_version, errors=errors)

    # ------------------------------------------------------------------------------------
    def _bind_globals(self, stages: list[Stage], inputs: list[InputFile], workdir: Location,
                      context: str) -> list[Stage]:
        """Build (or reuse) the state of the pass's global stage. Saved state is reused only when it was built
        from the same input bytes (`context`), so a rerun after an input changed rebuilds it."""
        if not stages or not isinstance(stages[0], GlobalStage):
            return stages
        stage = stages[0]
        state_loc = workdir.join(f"{stage.name}.state.pkl")
        saved = None
        if state_loc.exists():  # built before a crash: reuse if it is from the same inputs
            try:
                saved = pickle.loads(state_loc.read_bytes())
            except Exception:  # a torn or foreign file: rebuild
                saved = None
        if isinstance(saved, dict) and saved.get("context") == context and "state" in saved:
            state = saved["state"]
        else:
            log.info("building global index for %s over %d shards", stage.name, len(inputs))
            workdir.mkdir()
            # Locations, not local paths: global-stage state lives on the storage filesystem (s3:// too)
            state = stage.build([f.location for f in inputs], workdir=workdir, tasks=self.task_map())
            state_loc.write_bytes_atomic(pickle.dumps({"context": context, "state": state}))
        return [stage.bind(state), *stages[1:]]


def _context_of(inputs: list[InputFile]) -> str:
    """What a global stage's state depends on: every input's key and bytes. Inputs of an earlier pass and of
    a catalog version come with their sha256; other files (Parquet given by path) are hashed here."""
    parts = [(f.key, f.sha256 or location_digest(f.location).sha256) for f in inputs]
    return config_hash(parts)
