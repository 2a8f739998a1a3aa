"""Sandboxed test executions per second vs a bare-subprocess baseline (same programs, same pool size).

The workload is real: HumanEval canonical solutions with their tests (one program = one item's
`check`). The baseline runs each program with `python3 -I -S program.py` in a plain subprocess
(no namespaces, no rlimits, no uid switch, no audit hook); ours goes through `Sandbox.run`
(bubblewrap or unshare+setpriv, rlimits, scratch dir, capped output, verdict). Both use a pool of
`--workers` threads, each waiting on one child at a time.

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

from synth.coding.benchmarks import humaneval_program, load_humaneval  # noqa: E402
from synth.sandbox import Sandbox, SandboxLimits, available, run_many  # noqa: E402
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


def sandboxed(programs: list[str], workers: int, level: str) -> tuple[float, int]:
    with Sandbox(SandboxLimits(cpu_seconds=5, wall_seconds=30), isolation_level=level, max_workers=workers) as sb:
        start = time.perf_counter()
        results = run_many(sb, programs)
        return time.perf_counter() - start, sum(r.passed for r in results)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=80, help="HumanEval items (programs) per measurement")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2, help="alternate bare/sandbox this many times; best of")
    args = ap.parse_args()
    programs = [humaneval_program(it) for it in load_humaneval()[: args.items]]
    python = sandbox_python()
    levels = [lvl for lvl in ("bwrap", "unshare", "rlimits") if available(lvl)]
    print(f"{len(programs)} HumanEval programs, {args.workers} workers, {os.cpu_count()} cores, python {python}")
    best: dict[str, float] = {}
    for _ in range(args.repeats):   # interleaved so background load hits both alike
        t, ok = bare(programs, args.workers, python)
        assert ok == len(programs), f"bare: only {ok} passed"
        best["bare subprocess"] = min(best.get("bare subprocess", 1e9), t)
        for lvl in levels:
            t, ok = sandboxed(programs, args.workers, lvl)
            assert ok == len(programs), f"{lvl}: only {ok} passed"
            best[f"sandbox ({lvl})"] = min(best.get(f"sandbox ({lvl})", 1e9), t)
    base = len(programs) / best["bare subprocess"]
    print(f"{'runner':22s} {'execs/s':>8s} {'ms/exec':>8s} {'overhead':>9s}")
    for name, t in best.items():
        rate = len(programs) / t
        print(f"{name:22s} {rate:8.1f} {1000 * t / len(programs):8.1f} {base / rate:8.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
