"""The demo step: every task family evaluated on a tiny checkpoint with real numbers, results written as
versioned folders, a stages PNG (the judge is scripted here; the demo's default is the CPU judge model)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow


def test_demo_covers_every_family(tiny_checkpoint, shared_data, tmp_path):
    from synth.backends.scripted import ScriptedBackend

    from evals.model.demo import run

    judge = ScriptedBackend(lambda req, i: "Poor")
    paths = run(tmp_path, checkpoints=[tiny_checkpoint], limit=4, data_dir=str(shared_data / "benchmarks"),
                judge=judge, log=lambda *_: None)
    manifest = json.loads(paths[0].read_text())
    families = {t["family"] for t in manifest["tasks"].values()}
    assert families == {"loglik", "generation", "posttrain", "longcontext"}
    assert {"arc_easy", "mmlu", "gsm8k", "ifeval", "bfcl", "humaneval", "summaries", "niah"} <= set(manifest["tasks"])
    assert manifest["tasks"]["summaries"]["metrics"]["good_rate"] == 0.0 and judge.calls == 4
    assert manifest["tasks"]["arc_easy"]["metrics"]["n"] == 4
    assert manifest["model"]["step"] == 40 and manifest["model"]["max_new_tokens_cap"] == 32
    assert (tmp_path / "evals" / "model" / "stages.png").stat().st_size > 1000


def test_demo_runs_on_the_bundled_sample_without_shared_data(tiny_checkpoint, tmp_path, monkeypatch):
    """A user's machine: no benchmark folder, so the demo reads data/samples/eval_benchmarks."""
    from synth.backends.scripted import ScriptedBackend

    from evals.model.demo import run

    monkeypatch.delenv("CIDERMILL_BENCHMARKS", raising=False)
    paths = run(tmp_path, checkpoints=[tiny_checkpoint], limit=4, judge=ScriptedBackend(lambda req, i: "Good"),
                log=lambda *_: None)
    manifest = json.loads(paths[0].read_text())
    assert {t["family"] for t in manifest["tasks"].values()} == {"loglik", "generation", "posttrain", "longcontext"}
    assert manifest["tasks"]["mmlu"]["metrics"]["n"] == 4 and manifest["tasks"]["bfcl"]["metrics"]["n"] >= 1
    assert "eval_benchmarks" in json.dumps(manifest)  # the manifest names the data folder it used
