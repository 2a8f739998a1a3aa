"""Cross-check against lm-evaluation-harness: on the HF export of the tiny model, lm-eval (offline, local
jsonl through a task YAML, its own HFLM) and `eval model` (megatron backend on the checkpoint, and our HF
backend on the export) give the same acc and acc_norm on two log-likelihood tasks (ARC-Easy, PIQA)."""

from __future__ import annotations

import pytest

from evals.model.backends import HFLM, MegatronLM
from evals.model.loglik import items_for, score_items

pytestmark = pytest.mark.slow


def test_scores_equal_lm_eval(shared_data, tiny_checkpoint, tiny_export, tmp_path):
    pytest.importorskip("lm_eval")
    from evals.model.lm_eval_peer import run_lm_eval, write_task

    folder = shared_data / "benchmarks"
    megatron, hf = MegatronLM(tiny_checkpoint), HFLM(tiny_export)
    tasks = {}
    for name in ("arc_easy", "piqa"):
        items = items_for(name, folder, 60)
        tasks[write_task(items, tmp_path / "tasks", name)] = (name, items)
    theirs = run_lm_eval(tiny_export, tmp_path / "tasks", list(tasks))
    for task, (name, items) in tasks.items():
        ours, rows = score_items(megatron, items)
        ours_hf, rows_hf = score_items(hf, items)
        assert [r["pred"] for r in rows] == [r["pred"] for r in rows_hf]
        for metric in ("acc", "acc_norm"):
            assert abs(ours[metric] - theirs[task][metric]) <= 1e-3, (name, metric, ours, theirs[task])
            assert abs(ours_hf[metric] - theirs[task][metric]) <= 1e-3
    # the tiny model is weak but not constant: its predictions vary across items
    assert len({r["pred"] for r in rows}) > 1
