"""`make demo` (`cidermill demo`): every area's demo step, in order, on the bundled real data.

Each area owns a module with `run(root: str) -> None` (the corpus pipelines of configs/demo/, the
classifier, tokenize + mix, synth, train, evals, post-training, quantization); this file only runs them
in order. It sits beside the `cidermill` entry point (manifests/main.py) and, like it, imports an
area only when that area's step runs, so manifests keeps depending on pyarrow alone.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import time

# Each area's module with `run(root: str) -> None`; one that does not import stops the demo.
DEMO_STEPS = ["corpus.demo", "corpus.classify.demo", "corpus.mix.demo", "synth.demo", "training.demo",
              "evals.model.demo", "training.post_demo", "training.quantize.demo",
              "training.mdloo_demo", "training.itec_demo"]


def _arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--root", default="data/root")
    parser.add_argument("--only", help="run just this demo step module, or a glob of corpus pipeline configs")
    return parser


def add_parser(sub) -> None:
    _arguments(sub.add_parser("demo", help="run every area's demo on the bundled data")).set_defaults(func=run_demo)


def run_demo(args) -> int:
    os.makedirs(args.root, exist_ok=True)
    start = time.perf_counter()
    if args.only and args.only.endswith(".yaml"):  # corpus pipelines: the corpus step's own entry, by name
        importlib.import_module(DEMO_STEPS[0]).run_configs(args.root, args.only)
        return 0
    for module in DEMO_STEPS:
        if args.only and args.only != module:
            continue
        step = importlib.import_module(module)  # every step is part of the demo: a missing one is an error
        print(f"\n=== {module} ===", flush=True)
        step.run(args.root)
    print(f"\ndemo finished in {time.perf_counter() - start:.0f} s; browse with "
          f"`.venv/bin/cidermill data ls --root {args.root}`")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argparse.ArgumentParser(prog="cidermill demo")).parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return run_demo(args)


if __name__ == "__main__":
    sys.exit(main())
