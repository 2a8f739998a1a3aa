"""The `cidermill` command. Each area adds its own group; a group's module is imported only
when that group runs, so `cidermill data ls` does not load torch.

It lives in `manifests/` because that is the one package every other depends on and the only one a
trainer machine needs (pyarrow only): the dispatcher imports nothing but `manifests.errors` until a
group is chosen, so it adds no dependency edge and `cidermill data ...` works wherever manifests do.

Groups live in the package that owns them (`manifests.cli` for `data`, `training.cli` for
`train`, ...) and expose `add_parser(subparsers)`; handlers are `func(args) -> exit code`.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from manifests.errors import CidermillError, ConfigError

# group -> (module, one-line help). A module that is not there yet is skipped.
GROUPS: dict[str, tuple[str, str]] = {
    "data": ("manifests.cli", "dataset versions: ls, show, verify, diff"),
    "demo": ("manifests.demo", "run every area's demo on the bundled data"),
    "corpus": ("corpus.cli", "run pipelines, list stages"),
    "mix": ("corpus.mix.cli", "tokenizers, tokenized datasets, mixtures, ablations"),
    "synth": ("synth.cli", "synthetic post-training data"),
    "train": ("training.cli", "pretraining, distillation, pruning, post-training"),
    "eval": ("evals.cli", "evaluations of data and models"),
    "quantize": ("training.quantize.cli", "palettization and recovery adapters"),
}


def _setup_logging(verbose: int) -> None:
    level = logging.WARNING - 10 * verbose
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="cidermill", description="data-centric LM data engine")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    sub = parser.add_subparsers(dest="group", required=True, metavar="{" + ",".join(GROUPS) + "}")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for group, (module, help_text) in GROUPS.items():
        if group == chosen:
            try:
                importlib.import_module(module).add_parser(sub)
            except ModuleNotFoundError as exc:
                print(f"error: `cidermill {group}` is not available ({exc})", file=sys.stderr)
                return 2
        else:
            sub.add_parser(group, help=help_text, add_help=False)
    args = parser.parse_args(argv)
    _setup_logging(args.verbose)
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    except CidermillError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except FileNotFoundError as exc:   # a missing input names itself; -v keeps the traceback for a bug
        if args.verbose:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
