"""Our side of the end-to-end benchmark: `configs/web.yaml` as shipped (its local stages, then its global
stages: URL, exact and MinHash dedup, decontamination) on the benchmark's WARC files, local executor.

Only the input paths, the data root and the worker count are changed. The executor is timed from the
outside (each pass's task run and each global build), so the per-stage table has the builds too.
"""

from __future__ import annotations

import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "web.yaml"


def _timed(cls, name: str, log: list):
    original = getattr(cls, name)

    def wrapper(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            log.append((name, args, time.perf_counter() - t0))

    setattr(cls, name, wrapper)


def staging_bytes(staging: Path) -> dict:
    """Bytes a run holds in staging when it publishes: pass outputs, global-stage state, rejects, markers."""
    out = {"shards": 0, "state": 0, "rejects": 0, "markers": 0}
    for path in staging.rglob("*"):
        if not path.is_file():
            continue
        rel = path.relative_to(staging).parts
        kind = ("rejects" if rel[0] == "rejects" else "markers" if "tasks" in rel[:2] else
                "shards" if rel[0] == "shards" or (len(rel) > 1 and rel[1] == "shards") else "state")
        out[kind] += path.stat().st_size
    return out


def run(warc_dir: str, work: str, *, workers: int, config: Path = CONFIG) -> dict:
    """Run the pipeline; return its per-stage stats, pass timings, the bytes in staging at publish and the
    published versions."""
    from corpus.executors import run_pipeline
    from corpus.executors.base import Executor
    from corpus.executors.local import LocalExecutor
    from corpus.pipeline import load_pipeline
    from manifests.catalog import Catalog

    pipeline = load_pipeline(str(config), overrides={
        "input.paths": [f"{warc_dir}/*.warc.gz"], "output.root": f"{work}/ours-root", "executor.workers": workers})
    log: list = []
    _timed(LocalExecutor, "run_tasks", log)
    _timed(Executor, "_bind_globals", log)
    staged: dict = {}
    publish = Catalog.publish

    def measured_publish(self, staging, manifest, **kw):
        if manifest.name == pipeline.name and staging.is_local:
            staged.update(staging_bytes(Path(staging.path)))
        return publish(self, staging, manifest, **kw)

    Catalog.publish = measured_publish
    t0 = time.perf_counter()
    outcome = run_pipeline(pipeline, progress=False)
    wall = time.perf_counter() - t0
    builds = [(args[0][0].name, s) for name, args, s in log if name == "_bind_globals" and args[0]
              and hasattr(args[0][0], "build")]
    passes = [s for name, _, s in log if name == "run_tasks"]
    return {"wall_s": wall, "stats": [vars(s) | {"dropped": dict(s.dropped)} for s in outcome.stats],
            "builds": builds, "passes": passes, "staging_bytes": staged, "version": str(outcome.version.directory.uri),
            "rejects": str(outcome.rejects.directory.uri) if outcome.rejects else None,
            "workers": workers}


def _uuid(rid: str) -> str:
    return rid.strip("<>").removeprefix("urn:uuid:")


def kept_and_dropped(report: dict) -> tuple[dict[str, str], dict[str, tuple[str, str, str]]]:
    """(kept id -> text, dropped id -> (stage, reason, detail)) from the published version and its rejects."""
    from manifests.dataset import DatasetVersion

    kept = {}
    for batch in DatasetVersion(report["version"]).iter_batches(columns=["id", "text"]):
        kept.update(zip(map(_uuid, batch.column("id").to_pylist()), batch.column("text").to_pylist()))
    dropped = {}
    if report["rejects"]:
        for batch in DatasetVersion(report["rejects"]).iter_batches(
                columns=["id", "drop_stage", "drop_reason", "drop_detail"]):
            for rid, stage, reason, detail in zip(*(batch.column(i).to_pylist() for i in range(4))):
                dropped[_uuid(rid)] = (stage, reason, detail or "")
    return kept, dropped
