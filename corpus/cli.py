"""`cidermill corpus`: run pipelines, list stages, train a quality classifier.

The `cidermill` command itself is `manifests/main.py`; it imports this module only when the
`corpus` group runs.
"""

from __future__ import annotations

import sys

from manifests.main import GROUPS


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
    run.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                     help="override any config key, validated like the YAML (repeatable): "
                          "--set executor.workers=4 --set stages.text_length_v1.min_words=30")
    run.set_defaults(func=cmd_run)
    stages = csub.add_parser("stages", help="list registered stages and their options")
    stages.set_defaults(func=cmd_stages)
    from .classify.cli import add_subcommand as add_train_classifier

    add_train_classifier(csub)  # `corpus train-classifier` (corpus/classify/cli.py)
    from .plan import add_subcommand as add_plan

    add_plan(csub)  # `corpus plan` (corpus/plan.py)


def cmd_run(args) -> int:
    from manifests.overrides import parse_assignment

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
    for assignment in args.set:
        key, value = parse_assignment(assignment)
        overrides[key] = value
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
