"""The whole web pipeline, ours vs datatrove's FineWeb pipeline, on the same crawl, in one run.

    .venv/bin/python benchmarks/web_end_to_end.py [--docs 5000] [--files 2] [--workers 1,2] [--repeats 1]

Input (benchmarks/e2e_input.py): WARC files of real pages from ../shared/data with their URLs, 10% exact and
5% near duplicates, built into a work folder (never the repository). Ours: configs/web.yaml as shipped
(benchmarks/e2e_ours.py). Peer: datatrove 0.10.1's FineWeb example with its defaults, offline substitutions
printed (benchmarks/e2e_peer.py). Both on the local executor with the same number of workers and one task per
input file.

Each side runs in its own process session: wall time from start to exit (imports and model loads included),
CPU time of every process it started (this process is their subreaper, so even orphaned helpers are
counted), peak memory of the whole process tree (sum of RSS, sampled every 0.2 s) and of the driver. Then the
kept sets are compared and every difference is named (benchmarks/e2e_compare.py). The machine's load average
is printed with every figure: on a shared machine the wall-clock figures move with it, the CPU ones less.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(HERE), str(REPO)]
_PR_SET_CHILD_SUBREAPER = 36


def _own_peak_mb() -> float:
    """This process's peak resident size since it started. Not ru_maxrss: Linux carries the parent's resident
    size across fork and exec into the child's ru_maxrss, so a child of a large parent (this script's parent
    holds the input pages) would report the parent's size. VmHWM belongs to the exec'd image alone."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _side(args) -> None:
    """Child mode: run one pipeline, write its report as JSON."""
    t0 = time.perf_counter()
    if args.side == "ours":
        import e2e_ours

        report = e2e_ours.run(args.warc_dir, args.run_dir, workers=args.workers)
    else:
        import e2e_peer

        report = e2e_peer.run(args.warc_dir, args.run_dir, workers=args.workers, tasks=args.tasks)
    report["inner_wall_s"] = time.perf_counter() - t0
    report["driver_peak_mb"] = _own_peak_mb()
    Path(args.out).write_text(json.dumps(report, default=str))


def _reap_all(timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)


def measure(side: str, *, warc_dir: Path, run_dir: Path, workers: int, tasks: int, log: Path) -> dict:
    """Run one side in a fresh process session; wall, CPU of every descendant, peak tree RSS, its report."""
    import psutil

    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    out = run_dir / "report.json"
    cmd = [sys.executable, __file__, "--side", side, "--workers", str(workers), "--tasks", str(tasks),
           "--warc-dir", str(warc_dir), "--run-dir", str(run_dir), "--out", str(out)]
    env = dict(os.environ, OMP_NUM_THREADS="1", POLARS_MAX_THREADS="1", HF_HOME=str(run_dir / "hf"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = os.getloadavg()[0]
    me = psutil.Process()
    t0 = time.perf_counter()
    with open(log, "w") as logf:
        proc = subprocess.Popen(cmd, start_new_session=True, stdout=logf, stderr=subprocess.STDOUT, env=env)
        peak = 0
        while proc.poll() is None:
            rss = 0
            for p in me.children(recursive=True):
                try:
                    rss += p.memory_info().rss
                except psutil.Error:
                    pass
            peak = max(peak, rss)
            time.sleep(0.2)
    wall = time.perf_counter() - t0
    try:  # helpers left behind (a multiprocessing resource tracker, a forkserver) are this run's: end them
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _reap_all()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0 or not out.is_file():
        sys.exit(f"{side} failed (exit {proc.returncode}); see {log}")
    report = json.loads(out.read_text())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"side": side, "wall_s": wall, "cpu_s": cpu, "peak_tree_mb": peak / 2**20, "load": (load0, os.getloadavg()[0]),
            "report": report}


def _kept(side: str, m: dict, run_dir: Path):
    if side == "ours":
        import e2e_ours

        return e2e_ours.kept_and_dropped(m["report"])
    import e2e_peer

    kept, dropped = e2e_peer.kept_and_dropped(str(run_dir))
    strip = lambda i: i.strip("<>").removeprefix("urn:uuid:")  # noqa: E731
    return {strip(k): v for k, v in kept.items()}, {strip(k): v for k, v in dropped.items()}


def _stage_rows(side: str, report: dict, workers: int) -> list[tuple[str, int, float, str]]:
    """(stage, docs in, seconds, note): worker seconds inside the stage, summed over tasks; global builds and
    datatrove's bucket and cluster executors as wall seconds x workers."""
    rows = []
    if side == "ours":
        for st in report["stats"]:
            rows.append((st["name"], st["rows_in"], st["seconds"], ""))
        for name, seconds in report["builds"]:
            rows.append((f"{name} (build)", 0, seconds * workers, "wall x workers"))
        return rows
    for step in report["steps"]:
        st = step["stats"]
        n = st.get("total") or st.get("documents") or 0
        n = n.get("total", 0) if isinstance(n, dict) else n
        if step["executor"] in ("minhash buckets", "minhash cluster"):
            continue
        rows.append((f"{step['step']} [{step['executor']}]", int(n), step["seconds"], ""))
    for ex in report["executors"]:
        if ex["name"] in ("minhash buckets", "minhash cluster"):
            rows.append((ex["name"], 0, ex["wall_s"] * workers, "wall x workers"))
    return rows


def print_side_table(results: dict, docs: int, workers: int) -> None:
    print(f"\n== {workers} worker(s): {docs:,} input records ==")
    print(f"{'pipeline':12} {'wall s':>8} {'CPU s':>8} {'docs/s/core':>12} {'docs/CPU-s':>11} {'tree peak':>10} "
          f"{'driver peak':>11} {'kept':>6}  load avg (start, end)")
    for side, m in results.items():
        print(f"{side:12} {m['wall_s']:8.1f} {m['cpu_s']:8.1f} {docs / m['wall_s'] / workers:12.1f} "
              f"{docs / m['cpu_s']:11.1f} {m['peak_tree_mb']:8.0f} MB {m['report']['driver_peak_mb']:8.0f} MB "
              f"{m['kept']:6,}  {m['load'][0]:.1f}, {m['load'][1]:.1f}")
    o, p = results["ours"], results["datatrove"]
    print(f"ratio ours/datatrove: {p['wall_s'] / o['wall_s']:.2f}x documents/s per core (wall), "
          f"{p['cpu_s'] / o['cpu_s']:.2f}x documents per CPU second")


def print_stages(side: str, report: dict, workers: int) -> None:
    print(f"\n  {side} per stage ({workers} worker(s)): seconds summed over tasks")
    for name, n, seconds, note in _stage_rows(side, report, workers):
        rate = f"{n / seconds:10.1f}" if n and seconds else f"{'-':>10}"
        print(f"    {name[:48]:48} {n:8,} docs {seconds:9.1f} s {rate} docs/s/core  {note}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=5000, help="response records in the input")
    ap.add_argument("--files", type=int, default=2, help="WARC files (= tasks on both sides)")
    ap.add_argument("--start", type=int, default=0, help="first record of the input's sequence (e.g. past the "
                    "pool of real pages, ~4,860 records: later rounds' variants only; e2e_input.py)")
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    ap.add_argument("--repeats", type=int, default=1, help="runs per side and worker count; the fastest counts")
    ap.add_argument("--work", help="work folder (default: a new temporary folder, deleted at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--only", choices=["ours", "datatrove"], help="run one side only (no ratio, no agreement)")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    ap.add_argument("--warc-dir", help=argparse.SUPPRESS)
    ap.add_argument("--run-dir", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--tasks", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:
        args.workers = int(args.workers)
        _side(args)
        return 0

    import e2e_compare
    import e2e_input
    import e2e_peer

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="cm-e2e-"))
    try:
        warc_dir = work / "input"
        summary = e2e_input.write_warcs(warc_dir, docs=args.docs, files=args.files, start=args.start)
        print(f"input: {summary['records']:,} response records ({summary['html_records']:,} HTML) in "
              f"{len(summary['files'])} WARC files, {summary['bytes'] / 1e6:.0f} MB; pool {summary['pool']:,}: "
              f"{summary['originals']:,} real pages, {summary['exact_duplicates']} exact and "
              f"{summary['near_duplicates']} near duplicates; by kind {summary['by_kind']}; past the pool "
              f"{summary['variants']:,} distinct variants and {summary['repeats_unchanged']:,} unchanged repeats; "
              f"URLs made from a "
              f"domain field {summary['urls_from_domain']}, from the set name {summary['synthesized_urls']}")
        print("datatrove run offline with: " + "; ".join(e2e_peer.SUBSTITUTIONS))
        print(f"machine: {os.cpu_count()} cores, load average now {os.getloadavg()[0]:.1f}")
        sides = [args.only] if args.only else ["ours", "datatrove"]
        last: dict = {}
        for workers in (int(w) for w in args.workers.split(",")):
            results = {}
            for side in sides:
                runs = [measure(side, warc_dir=warc_dir, run_dir=work / f"{side}-w{workers}", workers=workers,
                                tasks=len(summary["files"]), log=work / f"{side}-w{workers}-{r}.log")
                        for r in range(args.repeats)]
                best = min(runs, key=lambda m: m["wall_s"])
                best["kept_sets"] = _kept(side, best, work / f"{side}-w{workers}")
                best["kept"] = len(best["kept_sets"][0])
                results[side] = best
                if args.repeats > 1:
                    walls = ", ".join(f"{m['wall_s']:.1f}" for m in runs)
                    print(f"  {side}, {workers} worker(s): walls {walls} s")
            if len(results) == 2:
                print_side_table(results, summary["records"], workers)
            for side, m in results.items():
                print(f"  {side}: {m['wall_s']:.1f} s wall, {m['cpu_s']:.1f} s CPU, kept {m['kept']:,}")
                print_stages(side, m["report"], workers)
            last = results
        if len(last) == 2:
            records = e2e_compare.load_records(work / "input-records.jsonl")
            peer_kept, peer_dropped = last["datatrove"]["kept_sets"]
            lost = e2e_compare.peer_lost(summary["files"], set(peer_kept) | set(peer_dropped))
            res = e2e_compare.explain(records, last["ours"]["kept_sets"], last["datatrove"]["kept_sets"],
                                      peer_lost=lost, config=REPO / "configs" / "web.yaml")
            e2e_compare.print_agreement(res)
            (work / "agreement.json").write_text(json.dumps(res, indent=1))
    except SystemExit:   # a side failed: its log is in the work folder, which the message names
        args.keep = True
        raise
    finally:
        if args.work or args.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
