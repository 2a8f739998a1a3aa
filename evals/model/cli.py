"""`cidermill eval model CHECKPOINT --tasks ...`, `eval compare A B`, `eval plot RESULT...`. Thin: parse, call, print."""

from __future__ import annotations

import json
from pathlib import Path


def add_model_parser(ksub) -> None:
    p = ksub.add_parser("model", help="evaluate a model checkpoint on benchmark tasks (offline)")
    p.add_argument("checkpoint", help="cidermill checkpoint or run directory, a transformers folder, "
                                      "or a model name with --backend openai")
    p.add_argument("--tasks", default="pretrain",
                   help="comma-separated task names or suites (pretrain, gauntlet, posttrain, all)")
    p.add_argument("--limit", type=int, help="first N items of each task")
    p.add_argument("--json", action="store_true", help="print the result manifest as JSON")
    p.add_argument("--backend", default="auto", choices=["auto", "megatron", "hf", "openai", "vllm"])
    p.add_argument("--base-url", help="OpenAI-compatible server URL (--backend openai)")
    p.add_argument("--max-length", type=int, default=4096, help="longest sequence given to the model")
    p.add_argument("--data-dir", help="benchmark data folder (default: $CIDERMILL_BENCHMARKS, bundled sets, "
                                      "../shared/data/benchmarks)")
    p.add_argument("--out", help="result folder (manifest.json + samples/); default data/evals/model/<name>")
    p.add_argument("--code-samples", type=int, default=1,
                   help="samples per HumanEval/MBPP problem: 1 = greedy pass@1; n > 1 = sampled, pass@k for k <= n")
    p.add_argument("--judge", default="cpu", help="synth backend that grades summaries (cpu, openai, vllm)")
    p.add_argument("--list", action="store_true", help="list the tasks and exit")
    p.add_argument("--pairs", default="data/samples/preference/alpaca_eval/fusechat_weighted.json.gz",
                   help="--tasks preference: a preference-pair file for a reward-model checkpoint")
    p.add_argument("--pairs-format", default="auto", help="--tasks preference: llamafactory, hh_rlhf, alpaca_eval, "
                                                          "graded or auto")
    p.set_defaults(func=cmd_model)

    c = ksub.add_parser("compare", help="print per-task metric deltas between two model-eval results")
    c.add_argument("a")
    c.add_argument("b")
    c.set_defaults(func=cmd_compare)

    pl = ksub.add_parser("plot", help="PNG of a run's checkpoints across stages: held-out loss and scores")
    pl.add_argument("results", nargs="+", help="result folders, in training order")
    pl.add_argument("--out", required=True, help="PNG path")
    pl.set_defaults(func=cmd_plot)


def cmd_model(args) -> int:
    from .backends import load_lm
    from .runner import default_out, evaluate, expand_tasks, task_registry, write_results

    if args.list:
        for name, (family, _) in task_registry().items():
            print(f"{family:12s} {name}")
        return 0
    if args.tasks == "preference":
        return cmd_preference(args)
    check_options(args)
    tasks = expand_tasks(args.tasks)
    lm = load_lm(args.checkpoint, backend=args.backend, max_length=args.max_length, base_url=args.base_url)
    options = {t: {"samples": args.code_samples} for t in ("humaneval", "mbpp")}
    if "summaries" in tasks:
        from synth.backends import load_backend

        options["summaries"] = {"judge": load_backend(args.judge)}
    result = evaluate(lm, tasks, limit=args.limit, data_dir=args.data_dir, options=options,
                      log=(lambda *_: None) if args.json else print)
    path = write_results(result, Path(args.out) if args.out else default_out(result["model"], args.checkpoint))
    if args.json:
        print(path.read_text())
    else:
        print(f"results in {path}")
    return 0


def check_options(args) -> None:
    """The numbers, before any model is loaded: a limit of 0 or -1 used to score nothing (or all but one
    item) and report it as a result."""
    from manifests.config import require_number

    if args.limit is not None:
        require_number(args.limit, "--limit", ge=1, integer=True, where="eval model")
    require_number(args.max_length, "--max-length", ge=2, integer=True, where="eval model")
    require_number(args.code_samples, "--code-samples", ge=1, integer=True, where="eval model")


def cmd_preference(args) -> int:
    """A reward-model checkpoint on preference pairs: pairwise accuracy and ECE of sigmoid(delta) against the
    level's target probability, per preference level (training.reward.preference_eval)."""
    import json

    from training.reward import preference_eval

    from training.checkpoint import open_checkpoint, weights_id

    check_options(args)
    report = preference_eval(args.checkpoint, args.pairs, fmt=args.pairs_format, max_records=args.limit)
    info = open_checkpoint(args.checkpoint)
    out = Path(args.out or Path("data/evals/model") / f"{info.manifest.get('run')}-{info.directory.name}-"
                                                      f"{weights_id(info)[:12]}-preference")
    out.mkdir(parents=True, exist_ok=True)
    payload = {"task": "preference", "checkpoint": str(args.checkpoint), "pairs": str(args.pairs),
               **{k: v for k, v in report.items() if k != "table"}}
    (out / "manifest.json").write_text(json.dumps(payload, indent=1, default=str) + "\n")
    print(json.dumps(payload, indent=1, default=str) if args.json else report["table"])
    return 0


def cmd_compare(args) -> int:
    from corpus.report import format_table

    from .runner import compare, read_results

    rows = compare(read_results(args.a), read_results(args.b))
    fmt = lambda v: "" if v is None else f"{v:+.4f}" if isinstance(v, float) else str(v)  # noqa: E731
    print(format_table(["task", "metric", "A", "B", "B-A", "note"],
                       [[r["task"], r["metric"], fmt(r["A"]).lstrip("+"), fmt(r["B"]).lstrip("+"), fmt(r["delta"]),
                         r["note"]] for r in rows]))
    return 0


def cmd_plot(args) -> int:
    from .plot import plot_stages
    from .runner import read_results

    path = plot_stages([read_results(r) for r in args.results], args.out)
    print(json.dumps({"png": str(path)}))
    return 0
