"""Judged HumanEval items per second vs a bare-subprocess baseline (same items, same pool size).

The workload is real: HumanEval canonical solutions with their tests (one item = its `check`).
The peer is the bare way of running them: each item as one program (prompt + solution + check)
under `python3 -I -S program.py` in a plain subprocess (no namespaces, no limits, and a verdict the
program itself could fake). Ours is `Sandbox.judge`, the trusted path: an isolated solution process
per item (bubblewrap or the namespace level) answering calls, the assertions decided by the parent
or by an isolated tests process (fork server), each slot's next solution process pre-started while
the current item is judged. Both use a pool of `--workers` threads. Reads HumanEval from
../shared/data/benchmarks (or --data). Overhead = our time / bare time on the same items.

    .venv/bin/python benchmarks/sandbox_overhead.py --items 80 --workers 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from synth.coding.benchmarks import humaneval_judge_job, humaneval_program, load_humaneval  # noqa: E402
from synth.sandbox import Sandbox, SandboxLimits, available  # noqa: E402
from synth.sandbox.isolation import sandbox_python  # noqa: E402


def bare(programs: list[str], workers: int, python: str) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, p in enumerate(programs):
            path = Path(tmp) / f"p{i}.py"
            path.write_text(p)
            paths.append(path)

        def one(path: Path) -> bool:
            r = subprocess.run([python, "-I", "-S", str(path)], capture_output=True, timeout=30, cwd=tmp)
            return r.returncode == 0

        start = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            ok = sum(pool.map(one, paths))
        return time.perf_counter() - start, ok


def judged(jobs: list[dict], workers: int, level: str) -> tuple[float, int]:
    with Sandbox(SandboxLimits(cpu_seconds=5, wall_seconds=30), isolation_level=level, max_workers=workers) as sb:
        start = time.perf_counter()
        results = sb.judge_many([{**job, "timeout_s": 10.0} for job in jobs])
        return time.perf_counter() - start, sum(r.passed for r in results)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=80, help="HumanEval items (programs) per measurement")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2, help="alternate bare/sandbox this many times; best of")
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "benchmarks"),
                    help="HumanEval.jsonl.gz or a folder holding it")
    args = ap.parse_args()
    items = load_humaneval(args.data)[: args.items]
    programs = [humaneval_program(it) for it in items]
    jobs = [humaneval_judge_job(it) for it in items]
    python = sandbox_python()
    levels = [lvl for lvl in ("bwrap", "unshare") if available(lvl)]
    print(f"{len(programs)} HumanEval programs, {args.workers} workers, {os.cpu_count()} cores, python {python}")
    best: dict[str, float] = {}
    for _ in range(args.repeats):   # interleaved so background load hits both alike
        t, ok = bare(programs, args.workers, python)
        assert ok == len(programs), f"bare: only {ok} passed"
        best["bare subprocess"] = min(best.get("bare subprocess", 1e9), t)
        for lvl in levels:
            t, ok = judged(jobs, args.workers, lvl)
            assert ok == len(programs), f"{lvl}: only {ok} passed"
            best[f"judge ({lvl})"] = min(best.get(f"judge ({lvl})", 1e9), t)
    base = len(programs) / best["bare subprocess"]
    print(f"{'runner':22s} {'execs/s':>8s} {'ms/exec':>8s} {'overhead':>9s}")
    for name, t in best.items():
        rate = len(programs) / t
        print(f"{name:22s} {rate:8.1f} {1000 * t / len(programs):8.1f} {base / rate:8.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
