"""The `lm_eval` command itself (lm-evaluation-harness is installed without its dependencies): on the HF export
of the tiny model and a bundled task (ARC-Easy items shipped in data/samples/eval_benchmarks), it scores,
writes its results and exits 0 (it used to exit 1 after writing them: `No module named 'pytablewriter'`), and
its accuracy is the one `eval model` gives on the same items."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evals.model.backends import HFLM
from evals.model.loglik import items_for, score_items

pytestmark = pytest.mark.slow
BUNDLED = Path(__file__).resolve().parents[3] / "data" / "samples" / "eval_benchmarks" / "benchmarks"


def test_lm_eval_command_scores_writes_results_and_exits_0(tiny_export, tmp_path):
    pytest.importorskip("lm_eval")
    from evals.model.lm_eval_peer import write_task

    items = items_for("arc_easy", BUNDLED, 12)
    task = write_task(items, tmp_path / "tasks", "arc_easy")
    lm_eval = Path(sys.executable).parent / "lm_eval"
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([str(lm_eval), "--model", "hf", "--model_args", f"pretrained={tiny_export},dtype=float32",
                           "--tasks", task, "--include_path", str(tmp_path / "tasks"), "--device", "cpu",
                           "--batch_size", "4", "--output_path", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "acc" in proc.stdout  # the results table (pytablewriter) was printed
    results = list((tmp_path / "out").rglob("results*.json"))
    assert len(results) == 1
    theirs = json.loads(results[0].read_text())["results"][task]
    ours, _ = score_items(HFLM(tiny_export), items)
    assert abs(theirs["acc,none"] - ours["acc"]) <= 1e-6
