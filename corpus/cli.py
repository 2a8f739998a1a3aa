"""The `cidermill` command. Each area adds its own group; a group's module is imported only
when that group runs, so `cidermill data ls` does not load torch.

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
    "corpus": ("corpus.cli", "run pipelines, list stages"),
    "mix": ("corpus.mix.cli", "tokenizers, tokenized datasets, mixtures, ablations"),
    "synth": ("synth.cli", "synthetic post-training data"),
    "train": ("training.cli", "pretraining, distillation, pruning, post-training"),
    "eval": ("evals.cli", "evaluations of data and models"),
    "quantize": ("training.quantize.cli", "palettization and recovery adapters"),
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("corpus", help=GROUPS["corpus"][1])
    csub = p.add_subparsers(dest="corpus_cmd", required=True)
    run = csub.add_parser("run", help="run a pipeline YAML into a new dataset version")
    run.add_argument("pipeline", help="pipeline YAML file")
    run.add_argument("--dry-run", action="store_true", help="validate and print the plan; write nothing")
    run.add_argument("--executor", choices=["local", "ray"], help="override executor.kind")
    run.add_argument("--workers", type=int, help="override executor.workers")
    run.add_argument("--address", help="ray cluster address (implies --executor ray)")
    run.add_argument("--root", help="override output.root (the data root)")
    run.add_argument("--no-progress", action="store_true")
    run.set_defaults(func=cmd_run)
    stages = csub.add_parser("stages", help="list registered stages and their options")
    stages.set_defaults(func=cmd_stages)
    from .classify.cli import add_subcommand as add_train_classifier

    add_train_classifier(csub)  # `corpus train-classifier` (corpus/classify/cli.py)


def cmd_run(args) -> int:
    from .executors import NothingKept, run_pipeline
    from .pipeline import describe_plan, load_pipeline
    from .report import stats_table

    overrides = {}
    if args.executor or args.address:
        overrides["executor.kind"] = "ray" if args.address else args.executor
    if args.address:
        overrides["executor.address"] = args.address
    if args.workers is not None:
        overrides["executor.workers"] = args.workers
    if args.root:
        overrides["output.root"] = args.root
    pipeline = load_pipeline(args.pipeline, overrides=overrides)
    if args.dry_run:
        print(describe_plan(pipeline))
        return 0
    try:
        outcome = run_pipeline(pipeline, progress=not args.no_progress)
    except NothingKept as exc:  # still show what each stage did, then fail
        print()
        print(stats_table(exc.stats))
        print()
        if exc.rejects is not None:
            print(f"rejects   {exc.rejects.name}@{exc.rejects.version_id[:12]} ({exc.rejects.manifest.rows:,} rows)")
        print(f"error: {exc}", file=sys.stderr)
        return 1
    v = outcome.version
    print()
    print(stats_table(outcome.stats))
    print()
    print(f"version   {v.name}@{v.version_id}")
    print(f"location  {v.directory.uri}")
    print(f"rows      {v.manifest.rows:,} in {len(v.manifest.shards)} shards ({v.manifest.bytes / 1e6:.2f} MB)")
    if outcome.rejects is not None:
        print(f"rejects   {outcome.rejects.name}@{outcome.rejects.version_id[:12]} ({outcome.rejects.manifest.rows:,} rows)")
    print(f"tasks     {outcome.tasks_run} run, {outcome.tasks_resumed} resumed, {outcome.seconds:.1f} s")
    shard_errors = [e for e in outcome.errors if e.get("kind") == "shard"]
    for e in shard_errors:
        print(f"shard error: {e['input']}: {e['reason']} (kept {e.get('records_read')} records before it)")
    return 0


def cmd_stages(args) -> int:
    import dataclasses

    from .registry import _IMPORT_FAILURES, all_stages

    for name, cls in all_stages().items():
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        print(f"{name:32} {doc}")
        for f in dataclasses.fields(cls.Config):
            default = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else "required")
            print(f"    {f.name} = {default!r}")
    for module, err in _IMPORT_FAILURES.items():
        print(f"(not available: {module}: {err})")
    return 0


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


if __name__ == "__main__":
    sys.exit(main())
