"""The post-training demo (`make demo` step): tiny SFT -> RM -> DPO on the shipped real data."""

from __future__ import annotations

import pytest


@pytest.mark.slow
@pytest.mark.heavy  # a minute; `make demo` (which CI runs in a fresh copy) runs the same demo
def test_post_demo_runs_and_prints_held_out_figures(tmp_path, capsys):
    from training.post_demo import run

    figures = run(str(tmp_path), rm_steps=20)  # the demo's 300 RM steps are measured, not tested
    out = capsys.readouterr().out
    assert figures["sft"][1] < figures["sft"][0] - 1.0  # held-out CE falls from ~ln 256
    assert "ECE" in out and "preference accuracy" in out and "95% CI" in out
    d0, d1 = figures["dpo"]
    assert d0["reward_margin"] == 0.0 and d1["reward_margin"] != 0.0
    assert figures["ipo_cache"] == "hit"  # same data and reference as the DPO run
