"""Executor overhead: an identity pipeline (read -> write a new version) against plain pyarrow
read + write of the same shards, in one run, same core count.

Ours does more than the baseline: streams record batches (bounded memory), fixed row groups,
sha256 of every output shard, sha256 of every input (recorded in the task's marker, so a resume
reuses a task only for the same input bytes; issue 35), completion markers, a manifest. The ratio is
ours / baseline time. The last line is the input hashing alone (one sha256 pass over the inputs).
With one worker everything runs in this process, so its CPU seconds (getrusage, all threads) are
printed too: on a busy machine they move less than the wall time does. Baseline and ours alternate, each
first in turn.

    .venv/bin/python benchmarks/executor_overhead.py [--shards 4] [--rows 25000] [--repeats 5] [--fresh]

`--fresh` runs every measurement in a process of its own (started afresh, both sides warmed up on a tiny copy
first, which also starts their pools once), so neither side inherits the other's heap, threads or pending
write-back.
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


def _one(args) -> None:
    """One measurement in this fresh process: prints {"wall": s, "cpu": s}."""
    folder, out = Path(args.folder), Path(args.out)
    paths = sorted(folder.glob("in-*.parquet"))
    warm = out.with_name(out.name + "-warm")
    warm.mkdir(parents=True)
    small = [warm / p.name for p in paths]  # as many as the inputs: two workers start their pool (and forkserver)
    for src, dst in zip(paths, small):
        pq.write_table(pq.read_table(src).slice(0, 100), dst, **write_options())
    if args.one == "base":
        baseline(small, warm / "out", args.workers)
        wall, cpu = _timed(baseline, paths, out, args.workers)
    else:
        ours(warm, warm / "root", args.workers)
        wall, cpu = _timed(ours, folder, out, args.workers)
    print(json.dumps({"wall": wall, "cpu": cpu}))


def _fresh(tmp: Path, side: str, workers: int, r: int) -> tuple[float, float]:
    import subprocess

    out = subprocess.run([sys.executable, __file__, "--one", side, "--workers", str(workers), "--folder", str(tmp),
                          "--out", str(tmp / f"{side}-{workers}-{r}")], check=True, capture_output=True, text=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return got["wall"], got["cpu"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--rows", type=int, default=25000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--fresh", action="store_true", help="each measurement in a fresh process")
    ap.add_argument("--one", choices=["base", "ours"], help=argparse.SUPPRESS)  # internal: one --fresh measurement
    ap.add_argument("--workers", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--folder", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        return _one(args)
    tmp = Path(tempfile.mkdtemp(prefix="cm-bench-"))
    try:
        paths = make_inputs(tmp, args.shards, args.rows)
        total_rows = args.shards * args.rows
        mb = sum(p.stat().st_size for p in paths) / 1e6
        print(f"{args.shards} shards, {total_rows:,} rows, {mb:.0f} MB zstd Parquet (real C4 text), "
              f"{os.cpu_count()} cores; best of {args.repeats}{', each in a fresh process' if args.fresh else ''}; "
              f"load average {os.getloadavg()[0]:.1f}")
        print(f"{'workers':>7}  {'pyarrow s':>9}  {'ours s':>7}  {'pyarrow rows/s':>14}  {'ours rows/s':>11}  ratio"
              f"  {'CPU-s pyarrow / ours':>20}  CPU ratio")
        for workers in (1, 2):
            runs: dict[str, list[tuple[float, float]]] = {"base": [], "ours": []}
            for r in range(args.repeats):
                # alternated, so a load change hits both alike, and in turn first: the side that runs second
                # otherwise always meets the first one's dirty pages being written back by the kernel
                sides = [("base", lambda: baseline(paths, tmp / f"base-{workers}-{r}", workers)),
                         ("ours", lambda: ours(tmp, tmp / f"root-{workers}-{r}", workers))]
                for name, fn in (sides if r % 2 == 0 else sides[::-1]):
                    runs[name].append(_fresh(tmp, name, workers, r) if args.fresh else _timed(fn))
            b, o = (min(w for w, _ in runs[k]) for k in ("base", "ours"))
            cpu = ""
            if workers == 1:  # with 2 the work is in the pool's processes (forkserver children), not counted here
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
