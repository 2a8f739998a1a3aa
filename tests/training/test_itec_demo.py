"""The iTeC demo (`make demo` step): tiny members, one iTeC round on shipped data, per-round mean reward."""

from __future__ import annotations

import math

import pytest


@pytest.mark.slow
def test_itec_demo_runs_one_round_and_prints_its_mean_reward(tmp_path, capsys):
    from manifests.catalog import Catalog
    from training.itec_demo import run

    out = run(str(tmp_path), rounds=1)
    printed = capsys.readouterr().out
    (r1,) = out["rounds"]
    assert f"iTeC round 1: mean reward {r1.mean_reward:.4f}" in printed and math.isfinite(r1.mean_reward)
    rows = Catalog(str(tmp_path)).resolve(r1.version).read().to_pylist()
    # 16 GSM8K + 8 chat + 8 instruction + the tool prompts that fit 512 tokens, 2 members x 2 samples each
    assert len(rows) == 4 * r1.counters["prompts_sampled"] and r1.counters["prompts_sampled"] >= 32
    assert {r["prompt_type"] for r in rows} == {"math", "chat", "instruction", "tool"}
    assert r1.mean_best_reward >= r1.mean_reward  # reranking picks each prompt's best
    assert out["model_calls"].generate == 2 and out["model_calls"].training == 0  # one round: no refresh
