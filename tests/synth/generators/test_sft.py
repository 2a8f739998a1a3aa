"""Dataset-agnostic SFT stages: greedy embedding dedup, the global dedup through the local
executor, LLM-judge scoring and thresholds, and the generator runner's manifest."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from corpus.executors import run_pipeline
from corpus.pipeline import load_pipeline
from manifests.catalog import Catalog
from synth.stages.sft_dedup import greedy_keep
from synth.stages.sft_judge import JudgeThreshold, LLMJudgeScore, parse_rating
from synth.generation.runner import run_generator


def test_greedy_keep_first_copy_wins_across_blocks():
    base = np.eye(4, dtype=np.float32)
    near = base[1] * 0.99 + base[2] * 0.01
    vecs = np.stack([base[0], base[1], near / np.linalg.norm(near), base[2], base[0]])
    assert greedy_keep(vecs, threshold=0.95).tolist() == [True, True, False, True, False]
    assert greedy_keep(vecs, threshold=0.95, block=2).tolist() == [True, True, False, True, False]


def test_judge_scores_then_threshold_decides(scripted):
    spec = scripted(lambda req, i: {"good": "Rating: 9", "bad": "Score = 2/10", "odd": "I like it"}[
        req.messages[-1]["content"].split("Answer:\n")[1].split("\n")[0]])
    t = pa.table({"prompt": ["q", "q", "q"], "response": ["good", "bad", "odd"]})
    scored = LLMJudgeScore({"backend": spec})(t).table
    assert scored.column("judge__score").to_pylist() == [9, 2, None]
    out = JudgeThreshold({"min_score": 6})(scored)
    assert out.table.column("response").to_pylist() == ["good"]
    assert out.stats.dropped == {"judge_below_threshold": 1, "judge_unparsed": 1}
    assert parse_rating("10") == 10 and parse_rating("rated 7 stars") is None


def test_runner_publishes_manifest_with_stats_and_rejects(tmp_path):
    table = pa.table({"id": ["a", "b"], "source": ["s", "s"], "prompt": ["x", "y"], "response": ["r", "r"],
                      "judge__score": pa.array([8, 1], pa.int32())})
    run = run_generator(str(tmp_path), "tiny-sft", table, [JudgeThreshold({"min_score": 5})],
                        extra={"backend": "none"})
    m = run.version.manifest
    assert m.rows == 1 and m.extra["backend"] == "none" and m.extra["seed_rows"] == 2
    assert [s.name for s in m.stats] == ["sft_judge_threshold_v1"] and m.stats[0].dropped == {"judge_below_threshold": 1}
    assert m.pipeline.stages[0]["config"]["min_score"] == 5
    assert run.rejects.read().column("drop_reason").to_pylist() == ["judge_below_threshold"]
    assert Catalog(str(tmp_path)).resolve("tiny-sft").version_id == run.version.version_id


@pytest.mark.slow
def test_global_embed_dedup_through_the_local_executor(tmp_path):
    texts = ["How do I reverse a list in Python?", "How can I reverse a Python list?",
             "What is the capital of France?", "Give me a recipe for pancakes.",
             "How do I reverse a list in Python?"]
    cat = Catalog(str(tmp_path))
    v = cat.write_table("sft-in", pa.table({"id": [f"r{i}" for i in range(5)], "source": ["t"] * 5, "prompt": texts}))
    pipeline = load_pipeline({"name": "sft-dedup", "input": {"format": "parquet", "version": "sft-in"},
                              "output": {"root": str(tmp_path)}, "executor": {"kind": "local", "workers": 1},
                              "stages": [{"sft_embed_dedup_v1": {"fields": ["prompt"], "threshold": 0.9}}]})
    out = run_pipeline(pipeline, progress=False)
    kept = sorted(out.version.read().column("id").to_pylist())
    assert kept == ["r0", "r2", "r3"]  # the paraphrase (r1) and the exact copy (r4) go
    stage = next(s for s in out.stats if s.name == "sft_embed_dedup_v1")
    assert stage.dropped == {"near_duplicate": 2}
