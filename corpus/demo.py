"""`make demo`: run every pipeline in configs/demo/ (in file-name order) on the bundled real data,
then the demo steps of the other areas (tokenize + mix, synth, train, evals) that are installed.
"""

from __future__ import annotations

import argparse
import glob
import importlib
import logging
import os
import sys
import time

from .executors import run_pipeline
from .pipeline import load_pipeline
from .report import stats_table

# Later areas add a module with `run(root: str) -> None`; missing ones are skipped.
DEMO_STEPS = ["corpus.classify.demo", "corpus.mix.demo", "synth.demo", "training.demo", "evals.model.demo",
              "training.post_demo", "training.quantize.demo"]


def run_configs(root: str, pattern: str = "configs/demo/*.yaml") -> None:
    for path in sorted(glob.glob(pattern)):
        pipeline = load_pipeline(path, overrides={"output.root": root})
        print(f"\n=== {path}: {pipeline.name} ===", flush=True)
        outcome = run_pipeline(pipeline, progress=False)
        v = outcome.version
        print(stats_table(outcome.stats))
        print(f"-> {v.name}@{v.version_id[:12]}  {v.manifest.rows:,} rows  at {v.directory.uri}"
              + (f"\n   rejects {outcome.rejects.name}@{outcome.rejects.version_id[:12]}" if outcome.rejects else ""))
        for e in outcome.errors:
            if e.get("kind") == "shard":
                print(f"   shard error: {e['input']}: {e['reason']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cidermill-demo")
    parser.add_argument("--root", default="data/root")
    parser.add_argument("--only", help="run just this demo step module or config glob")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    os.makedirs(args.root, exist_ok=True)
    start = time.perf_counter()
    if not args.only or args.only.endswith(".yaml"):
        run_configs(args.root, args.only or "configs/demo/*.yaml")
    for module in DEMO_STEPS:
        if args.only and args.only != module:
            continue
        try:
            step = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                continue
            raise
        print(f"\n=== {module} ===", flush=True)
        step.run(args.root)
    print(f"\ndemo finished in {time.perf_counter() - start:.0f} s; browse with "
          f"`.venv/bin/cidermill data ls --root {args.root}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
