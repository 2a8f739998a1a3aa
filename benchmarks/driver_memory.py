"""Peak driver memory of the global builds (exact, URL and MinHash dedup, decontamination) as the
corpus grows: synthetic corpora of 1e5 / 1e6 / 1e7 tiny rows, local process-pool workers.

    nice -n 10 .venv/bin/python benchmarks/driver_memory.py --rows 1e5 1e6 1e7 --workers 2

Each (size, stage) runs in a fresh process (the "driver"): it calls the stage's `build` with a
LocalTaskMap, so the work runs in pool worker processes, and reports its own peak RSS (VmHWM from
/proc/self/status: the driver only, not its children). A process that only imports the engine gives
the floor. Prints the table and writes a PNG (matplotlib). Peer: run the same script with
PYTHONPATH pointing at an older checkout (`--label before`) to compare; the build API takes plain
paths in both. Synthetic rows: 8 words from a 20k-word vocabulary, 10% exact copies of an earlier
row, 5% near copies (one word changed), 10% of URLs repeat an earlier row's; a few rows hold a GSM8K question.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STAGES = {"exact": ("exact_dedup_v1", {}), "url": ("url_dedup_v1", {}),
          "minhash": ("minhash_dedup_v1", {"batch_rows": 8192}),
          "decontam": ("decontaminate_v1", {"benchmarks": ["gsm8k", "mmlu", "arc", "triviaqa"]})}
ROWS_PER_SHARD = 100_000
GSM8K_Q = ("Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for "
           "her friends every day with four.")


def peak_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def generate(folder: Path, n_rows: int, seed: int = 0) -> list[str]:
    """Shards of ROWS_PER_SHARD rows: id, text, url (vectorised; done in its own process)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    vocab = pa.array([f"w{i}" for i in range(20_000)])
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    # at least 4 shards: with one, the pool would run the task inline, in the driver we measure
    per_shard = -(-n_rows // max(4, -(-n_rows // ROWS_PER_SHARD)))
    for s, lo in enumerate(range(0, n_rows, per_shard)):
        n = min(per_shard, n_rows - lo)
        words = rng.integers(0, len(vocab), size=(n, 8))
        copy = rng.random(n) < 0.10  # exact copies of an earlier row of this shard
        src = (rng.random(n) * np.arange(n)).astype(np.int64)
        words[copy] = words[src[copy]]
        near = (rng.random(n) < 0.05) & ~copy
        words[near] = words[src[near]]
        words[near, 3] = rng.integers(0, len(vocab), size=int(near.sum()))
        cols = [pc.take(vocab, pa.array(words[:, j])) for j in range(8)]
        text = pc.binary_join_element_wise(*cols, " ")
        gsm = rng.random(n) < 1e-4
        text = pc.if_else(pa.array(gsm), pa.scalar(GSM8K_Q), text)
        page = lo + np.arange(n)
        repeat = rng.random(n) < 0.10  # the URL of an earlier row of this shard
        page[repeat] = lo + src[repeat]
        url = pc.binary_join_element_wise(pa.scalar("https://s"), pc.cast(pa.array(page % 1000), pa.string()),
                                          pa.scalar(".example/p"), pc.cast(pa.array(page), pa.string()), "")
        ids = pc.binary_join_element_wise(pa.scalar(f"r{s}-"), pc.cast(pa.array(np.arange(n)), pa.string()), "")
        p = folder / f"shard-{s:05d}.parquet"
        pq.write_table(pa.table({"id": ids, "text": text, "url": url}), p, compression="zstd")
        paths.append(str(p))
    return paths


def run_one(stage_key: str, shards: list[str], workdir: str, workers: int) -> dict:
    """The driver: build one global stage; report its peak RSS and what it dropped."""
    from corpus.executors.local import LocalTaskMap
    from corpus.registry import stage_class

    name, options = STAGES[stage_key]
    stage = stage_class(name)(options)
    base = peak_rss_mb()  # engine and stage modules loaded, nothing built yet
    start = time.perf_counter()
    state = stage.build(shards, workdir=workdir, tasks=LocalTaskMap(workers))
    seconds = time.perf_counter() - start
    try:
        from corpus.dedup.drops import read_drops

        dropped = read_drops(state).num_rows
    except ImportError:  # an older checkout: one Parquet path
        import pyarrow.parquet as pq

        dropped = pq.read_metadata(state).num_rows if state else 0
    return {"stage": stage_key, "peak_mb": peak_rss_mb(), "after_import_mb": base, "seconds": seconds,
            "dropped": dropped}


def _child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=os.environ)
    if out.returncode:
        raise SystemExit(f"child {args[:3]} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", nargs="+", default=["1e5", "1e6"], help="corpus sizes")
    ap.add_argument("--stages", default="exact,url,minhash,decontam")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tmp", default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--png", default="benchmarks/driver_memory.png")
    ap.add_argument("--json", default=None, help="also write the measurements here")
    ap.add_argument("--label", default="driver-light")
    ap.add_argument("--plot-only", nargs="+", metavar="JSON", help="merge earlier --json outputs into one table/PNG")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.plot_only:
        runs = [json.loads(Path(p).read_text()) for p in args.plot_only]
        report([r for run in runs for r in run["results"]], args.stages.split(","), min(r["floor_mb"] for r in runs),
               args, run_label=runs[0]["label"])
        return 0
    if args.child:
        kind, *rest = args.child
        if kind == "gen":
            print(json.dumps({"shards": generate(Path(rest[0]), int(float(rest[1])))}))
        elif kind == "floor":
            import corpus.executors.local  # noqa: F401
            import corpus.registry  # noqa: F401

            print(json.dumps({"peak_mb": peak_rss_mb()}))
        else:
            print(json.dumps(run_one(kind, json.loads(rest[0]), rest[1], int(rest[2]))))
        return 0

    stages = args.stages.split(",")
    results = []
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        floor = _child(["--child", "floor"])["peak_mb"]
        for size in args.rows:
            n = int(float(size))
            data = Path(tmp) / f"in-{n}"
            t0 = time.perf_counter()
            shards = _child(["--child", "gen", str(data), str(n)])["shards"]
            print(f"# {n:,} rows in {len(shards)} shards generated in {time.perf_counter() - t0:.0f} s", flush=True)
            for st in stages:
                r = _child(["--child", st, json.dumps(shards), str(Path(tmp) / f"work-{n}-{st}"), str(args.workers)])
                r["rows"] = n
                results.append(r)
                print(f"{n:>12,} {st:9s} driver peak {r['peak_mb']:8.0f} MB  ({r['seconds']:7.1f} s, "
                      f"{r['dropped']:,} dropped)", flush=True)
                subprocess.run(["rm", "-rf", str(Path(tmp) / f"work-{n}-{st}")])
            subprocess.run(["rm", "-rf", str(data)])
    if args.json:
        Path(args.json).write_text(json.dumps({"label": args.label, "floor_mb": floor, "results": results}, indent=1))
    report(results, stages, floor, args, run_label=args.label)
    return 0


def report(results: list[dict], stages: list[str], floor: float, args, *, run_label: str) -> None:
    stages = [st for st in stages if any(r["stage"] == st for r in results)]
    print(f"\ndriver peak RSS (MB), {run_label}; floor (engine imported, nothing built): {floor:.0f} MB")
    sizes = sorted({r["rows"] for r in results})
    print("| stage | " + " | ".join(f"{s:.0e} rows" for s in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for st in stages:
        by = {r["rows"]: r for r in results if r["stage"] == st}
        print(f"| {st} | " + " | ".join(f"{by[s]['peak_mb']:.0f} (+{by[s]['peak_mb'] - by[s]['after_import_mb']:.0f}; "
                                        f"{by[s]['seconds']:.0f} s)" if s in by else "-" for s in sizes) + " |")
    print("(cells: peak MB (+ growth during build over the process with the stage loaded; build seconds))")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for st in stages:
        pts = sorted((r["rows"], r["peak_mb"]) for r in results if r["stage"] == st)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=st)
    ax.axhline(floor, color="grey", ls="--", lw=1, label="engine imported")
    ax.set_xscale("log")
    ax.set_xlabel("rows in the corpus")
    ax.set_ylabel("driver peak RSS (MB)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Global builds: driver peak memory ({run_label}, local workers)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.png, dpi=120)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    raise SystemExit(main())
