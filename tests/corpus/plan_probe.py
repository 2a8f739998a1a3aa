"""Fresh-interpreter helpers for the slow plan test (tests/corpus/test_plan_vs_run.py); each prints one JSON line.

    python -m tests.corpus.plan_probe plan CONFIG SAMPLE INPUT_BYTES TASK_BYTES CORES
    python -m tests.corpus.plan_probe run CONFIG

Both run in their own interpreter because that is what `corpus plan` and `corpus run` are: the plan counts the
driver's own start (its process time so far), which inside pytest would be every earlier test's time. `run`
starts the pipeline in a child and is its subreaper, so the CPU of every process the run started (the
forkserver and its workers, which outlive the driver by a moment) is counted when they exit.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36


def plan(config: str, sample: str, input_bytes: float, task_bytes: float, cores: int) -> dict:
    from corpus.pipeline import load_pipeline
    from corpus.plan import with_interval
    from corpus.plan_measure import measure
    from corpus.readers import InputFile
    from manifests.storage import Location

    loc = Location.parse(sample)
    pipeline = load_pipeline(config, overrides={"input.paths": [sample]})
    s = measure(pipeline, InputFile(loc, loc.name))
    p = with_interval(s, input_bytes=input_bytes, nodes=1, cores=cores, node_gbps=10.0, task_bytes=task_bytes)
    return {k: p[k] for k in ("wall_h", "cpu_h", "storage_bytes", "driver_bytes", "tasks", "workers",
                              "wall_h_interval", "cpu_h_interval", "storage_bytes_interval")}


def _inner(config: str) -> dict:
    """The run itself (the driver): its peak resident memory and the bytes staged when it publishes."""
    from corpus.executors import run_pipeline
    from corpus.pipeline import load_pipeline
    from manifests.catalog import Catalog

    pipeline = load_pipeline(config)
    staged: list[int] = []
    publish = Catalog.publish

    def measured_publish(self, staging, manifest, **kw):
        if manifest.name == pipeline.name and staging.is_local:  # the version (its rejects are staged inside)
            root = Path(staging.path)
            staged.append(sum(p.stat().st_size for p in root.rglob("*") if p.is_file()
                              and "tasks" not in p.relative_to(root).parts[:2]))  # markers are not data
        return publish(self, staging, manifest, **kw)

    Catalog.publish = measured_publish
    run_pipeline(pipeline, progress=False)
    return {"staging_bytes": sum(staged), "driver_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def run(config: str) -> dict:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tests.corpus.plan_probe", "inner", config],
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the run's orphans (the forkserver) are ours: reaped, their CPU counts
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.05)
        except ChildProcessError:
            break
    if proc.returncode:
        sys.exit(f"run failed: {proc.stderr[-3000:]}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {**out, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime}


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "plan":
        result = plan(args[0], args[1], float(args[2]), float(args[3]), int(args[4]))
    elif mode == "inner":
        result = _inner(args[0])
    else:
        result = run(args[0])
    print(json.dumps(result))
