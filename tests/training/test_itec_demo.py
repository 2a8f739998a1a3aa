"""The iTeC demo (`make demo` step) on the verifiable addition task: two rounds from the tiny addition SFT model,
the RS-SFT member of round 1 joins round 2, per-round committee reward, greedy accuracy on held-out sums."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_itec_demo_rs_member_beats_its_init_and_rerun_makes_no_model_call(tmp_path, capsys):
    from manifests.catalog import Catalog
    from training.itec_demo import run

    out = run(str(tmp_path))  # no MDLOO demo under this root: the committee starts as {sft}
    printed = capsys.readouterr().out
    r1, r2 = out["rounds"]
    assert r1.committee == ["sft"] and r2.committee == ["sft", "sft-r1"]
    assert f"iTeC round 2: committee mean sampled reward {r2.mean_reward:.4f}" in printed

    # held-out sums are never iTeC prompts: 10 distinct sums, none among the sampled ones
    held = {r["messages"][-1]["content"] for r in out["held_out"]}
    sampled = {r["messages"][-1]["content"] for r in out["train"]}
    assert len(held) == len(out["held_out"]) == 10 and not held & sampled and len(sampled) == 15
    rows = Catalog(str(tmp_path)).resolve(r2.version).read().to_pylist()
    assert {r["messages"] for r in rows} <= {f'[{{"role": "user", "content": "{s}"}}]' for s in sampled}
    assert {r["member"] for r in rows} == {"sft", "sft-r1"} and len(rows) == 48 * 2 * 4
    assert all(r["reward"] in (0.0, 1.0) for r in rows)  # the math rule reward alone

    # 48 prompts x 4 samples = 192 answers per member: the binomial standard error of a difference of two
    # such means is <= 0.051, so 0.15 is about three of them (measured: 0.23 -> 0.51)
    by = r2.mean_reward_by_member
    assert by["sft-r1"] >= by["sft"] + 0.15
    # committee mean, 192 answers in round 1 and 384 in round 2: standard error of the difference <= 0.044
    assert r2.mean_reward >= r1.mean_reward + 0.1
    # greedy (deterministic) answers to the 15 sums iTeC sampled: at least 2 more right (measured 7 -> 10)
    assert out["accuracy_seen"]["sft-r1"] >= out["accuracy_seen"]["sft"] + 2 / 15 - 1e-9
    # held-out sums: reported, not asserted to rise -- at this scale the RS member does not generalise to
    # sums it never saw (measured 0.3 -> 0.2 over 10 sums); see .notes/issue-20-rollout-note.md
    assert 0.0 <= out["accuracy"]["sft-r1"] <= 1.0 and "held-out greedy accuracy" in printed

    again = run(str(tmp_path))
    assert again["model_calls"].total == 0
    assert [r.version for r in again["rounds"]] == [r1.version, r2.version]
