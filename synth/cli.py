"""`cidermill synth ...`: coding triplets, the sandbox check, one-off generation.

    cidermill synth coding --root data/root --topics 8 --n-solutions 4            # CPU model
    cidermill synth coding --backend openai --base-url http://127.0.0.1:8000/v1 --model M --topics 71
    cidermill synth sandbox-check                   # HumanEval canonical/mutated in the sandbox
    cidermill synth generate "Write a haiku" --max-tokens 32
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

    s = ssub.add_parser("sandbox-check", help="run HumanEval canonical and mutated solutions in the sandbox")
    s.add_argument("--workers", type=int, default=2)
    s.add_argument("--isolation", default="auto", help="auto | bwrap | unshare | rlimits")
    s.set_defaults(func=cmd_sandbox_check)

    g = ssub.add_parser("generate", help="complete one prompt with a backend (a smoke test)")
    g.add_argument("prompt")
    g.add_argument("--max-tokens", type=int, default=64)
    g.add_argument("--temperature", type=float, default=0.0)
    g.add_argument("--n", type=int, default=1)
    g.add_argument("--seed", type=int, default=0)
    _backend_args(g)
    g.set_defaults(func=cmd_generate)


def _backend_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", default="cpu", choices=["cpu", "openai", "vllm"])
    p.add_argument("--base-url", help="openai: the server's /v1 URL")
    p.add_argument("--model", help="openai/vllm: model name or path")
    p.add_argument("--concurrency", type=int, default=8, help="openai: requests in flight")
    p.add_argument("--cache", help="response cache file (default: <root>/_cache/llm_responses.sqlite)")


def backend_spec(args) -> dict:
    from synth.backends import default_cache_path

    spec: dict = {"kind": args.backend}
    if args.backend == "openai":
        spec.update(base_url=args.base_url, model=args.model, concurrency=args.concurrency)
    elif args.backend == "vllm":
        spec.update(model=args.model)
    spec["cache_path"] = args.cache or default_cache_path(getattr(args, "root", "data/root"))
    return spec


def cmd_coding(args) -> int:
    from manifests import Catalog

    from .coding.pipeline import coding_stages, run_stages, write_run
    from .coding.topics import topics_table

    stages = coding_stages(backend_spec(args), questions_per_topic=args.questions_per_topic, n_tests=args.n_tests,
                           n_solutions=args.n_solutions, min_pass_rate=args.min_pass_rate,
                           max_tokens=args.max_tokens, seed=args.seed, workers=args.workers)
    run = run_stages(topics_table(args.topics), stages)
    kept, rejects, summary = write_run(Catalog(args.root), run, name=args.name, stages=stages)
    print(json.dumps(summary, indent=2))
    print(f"-> {kept.name}@{kept.version_id[:12]}  {kept.manifest.rows} triplets"
          + (f"; rejects {rejects.name}@{rejects.version_id[:12]} ({rejects.manifest.rows} rows)" if rejects else ""))
    return 0


def cmd_sandbox_check(args) -> int:
    import collections
    import time

    from .coding.benchmarks import humaneval_program, load_humaneval, mutated_humaneval_program
    from .sandbox import Sandbox, run_many

    items = load_humaneval()
    with Sandbox(isolation_level=args.isolation, max_workers=args.workers) as sb:
        for label, make, want in (("canonical", humaneval_program, "passed"),
                                  ("mutated", mutated_humaneval_program, "failed")):
            start = time.perf_counter()
            results = run_many(sb, [make(it) for it in items])
            counts = collections.Counter(r.verdict.value for r in results)
            print(f"{label:9s} {dict(counts)}  ({time.perf_counter() - start:.1f}s, isolation={sb.level}, "
                  f"want all {want})")
            if counts[want] != len(items):
                return 1
    return 0


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
