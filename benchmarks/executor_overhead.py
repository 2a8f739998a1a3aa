"""Executor overhead: an identity pipeline (read -> write a new version) against plain pyarrow
read + write of the same shards, in one run, same core count.

Ours does more than the baseline: streams record batches (bounded memory), fixed row groups,
sha256 of every output shard, sha256 of every input (recorded in the task's marker, so a resume
reuses a task only for the same input bytes; issue 35), completion markers, a manifest. The ratio is
ours / baseline time. The last line is the input hashing alone (one sha256 pass over the inputs).
With one worker everything runs in this process, so its CPU seconds (getrusage, all threads) are
printed too: on a busy machine they move less than the wall time does. Baseline and ours alternate.

    .venv/bin/python benchmarks/executor_overhead.py [--shards 4] [--rows 25000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from corpus.executors import run_pipeline  # noqa: E402
from corpus.pipeline import load_pipeline  # noqa: E402
from manifests.shards import write_options  # noqa: E402


def make_inputs(folder: Path, n_shards: int, rows: int) -> list[Path]:
    with gzip.open(REPO / "data/samples/c4/c4_demo.jsonl.gz", "rt") as f:
        texts = [json.loads(line)["text"] for line in f]
    paths = []
    for s in range(n_shards):
        batch = [texts[(s * rows + i) % len(texts)] + f" #{s}-{i}" for i in range(rows)]
        t = pa.table({"id": [f"{s}-{i}" for i in range(rows)], "source": ["c4"] * rows, "text": batch})
        path = folder / f"in-{s:03d}.parquet"
        pq.write_table(t, path, **write_options())
        paths.append(path)
    return paths


def plain_copy(args: tuple[str, str]) -> int:
    src, dst = args
    t = pq.read_table(src)
    pq.write_table(t, dst, row_group_size=4096, **write_options())
    return t.num_rows


def _cpu() -> float:
    """CPU seconds of this process (all its threads) and its reaped children."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(fn, *args) -> tuple[float, float]:
    """(wall, CPU) seconds of fn(*args)."""
    cpu, start = _cpu(), time.perf_counter()
    fn(*args)
    return time.perf_counter() - start, _cpu() - cpu


def baseline(paths: list[Path], out: Path, workers: int) -> float:
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(str(p), str(out / p.name)) for p in paths]
    start = time.perf_counter()
    if workers == 1:
        for j in jobs:
            plain_copy(j)
    else:
        with ProcessPoolExecutor(workers) as pool:
            list(pool.map(plain_copy, jobs))
    return time.perf_counter() - start


def ours(folder: Path, root: Path, workers: int) -> float:
    pipeline = load_pipeline({
        "name": "bench-identity",
        "input": {"format": "parquet", "paths": [str(folder / "in-*.parquet")]},
        "output": {"root": str(root), "rejects": False},
        "executor": {"kind": "local", "workers": workers, "batch_rows": 8192},
        "stages": [],
    })
    start = time.perf_counter()
    run_pipeline(pipeline, progress=False)
    return time.perf_counter() - start


def _hash_inputs(paths: list[Path]) -> float:
    import hashlib

    start = time.perf_counter()
    for path in paths:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(4 << 20):
                digest.update(chunk)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--rows", type=int, default=25000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cm-bench-"))
    try:
        paths = make_inputs(tmp, args.shards, args.rows)
        total_rows = args.shards * args.rows
        mb = sum(p.stat().st_size for p in paths) / 1e6
        print(f"{args.shards} shards, {total_rows:,} rows, {mb:.0f} MB zstd Parquet (real C4 text), "
              f"{os.cpu_count()} cores; best of {args.repeats}; load average {os.getloadavg()[0]:.1f}")
        print(f"{'workers':>7}  {'pyarrow s':>9}  {'ours s':>7}  {'pyarrow rows/s':>14}  {'ours rows/s':>11}  ratio"
              f"  {'CPU-s pyarrow / ours':>20}  CPU ratio")
        for workers in (1, 2):
            runs: dict[str, list[tuple[float, float]]] = {"base": [], "ours": []}
            for r in range(args.repeats):  # alternated, so a load change hits both alike
                runs["base"].append(_timed(baseline, paths, tmp / f"base-{workers}-{r}", workers))
                runs["ours"].append(_timed(ours, tmp, tmp / f"root-{workers}-{r}", workers))
            b, o = (min(w for w, _ in runs[k]) for k in ("base", "ours"))
            cpu = ""
            if workers == 1:  # with 2 the work is in the pool's processes, which getrusage does not see yet
                bc, oc = (min(c for _, c in runs[k]) for k in ("base", "ours"))
                cpu = f"  {bc:>9.2f} / {oc:<8.2f}  {oc / bc:.2f}x"
            print(f"{workers:>7}  {b:>9.2f}  {o:>7.2f}  {total_rows / b:>14,.0f}  {total_rows / o:>11,.0f}  "
                  f"{o / b:.2f}x{cpu}")
        h = min(_hash_inputs(paths) for _ in range(args.repeats))
        print(f"input hashing alone (sha256 of the {mb:.0f} MB of inputs, one core): {h:.3f} s; "
              f"load average {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
