"""Judged HumanEval items per second vs a bare-subprocess baseline (same items, same pool size).

The workload is real: HumanEval canonical solutions with their tests (one item = its `check`).
The peer is the bare way of running them: each item as one program (prompt + solution + check)
under `python3 -I -S program.py` in a plain subprocess (no namespaces, no limits, and a verdict the
program itself could fake). Ours is `Sandbox.judge`, the trusted path: an isolated solution process
per item (bubblewrap or the namespace level) answering calls, the assertions decided by the parent
or by an isolated tests process (fork server), each slot's next solution process pre-started while
the current item is judged. Both use a pool of `--workers` threads. Reads HumanEval from
../shared/data/benchmarks (or --data). Overhead = our time / bare time on the same items.

Ours: per slot one solution zygote (forking each item's solution process) and one tests fork
server, started inside the measured time. "cpu ms/exec" is all CPU time spent, this process and
every process it started (read after they were all reaped), per item: less sensitive than the wall
time to other load on the machine.

    .venv/bin/python benchmarks/sandbox_overhead.py --items 80 --workers 2
"""

from __future__ import annotations

import argparse
import os
import resource
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


def cpu_seconds() -> float:
    """User + system CPU of this process and of all its reaped descendants."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        total += r.ru_utime + r.ru_stime
    return total


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
    cpu: dict[str, float] = {}
    runners = {"bare subprocess": lambda: bare(programs, args.workers, python)}
    for lvl in levels:
        runners[f"judge ({lvl})"] = lambda lvl=lvl: judged(jobs, args.workers, lvl)
    for _ in range(args.repeats):   # interleaved so background load hits both alike
        for name, run in runners.items():
            c = cpu_seconds()
            t, ok = run()
            c = cpu_seconds() - c
            assert ok == len(programs), f"{name}: only {ok} passed"
            best[name], cpu[name] = min(best.get(name, 1e9), t), min(cpu.get(name, 1e9), c)
    n, base = len(programs), best["bare subprocess"]
    print(f"{'runner':22s} {'execs/s':>8s} {'ms/exec':>8s} {'overhead':>9s} {'cpu ms/exec':>12s} {'cpu ratio':>10s}")
    for name, t in best.items():
        print(f"{name:22s} {n / t:8.1f} {1000 * t / n:8.1f} {t / base:8.2f}x {1000 * cpu[name] / n:12.1f} "
              f"{cpu[name] / cpu['bare subprocess']:9.2f}x")
    print(f"load average {os.getloadavg()[0]:.2f} (1 min)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
