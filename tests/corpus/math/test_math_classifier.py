"""The math classifier (the model shipped with its manifest), its retraining, the eval, and the math demo."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pytest

from corpus.registry import stage_class
from manifests.errors import ConfigError

TRAIN_PAGES_DEBIAN = Path(__file__).resolve().parents[3] / "evals" / "data" / "math_pages" / "train_pages_debian.jsonl.zst"


def test_classifier_separates_math_from_web_text(c4_docs, tmp_path):
    from corpus.decontam.benchmarks import raw_items
    from corpus.math.classifier import load_model, predict, save

    # MATH test problems (the shipped decontamination copy) and C4 200-299: neither is training data
    problems = [{"problem": i.segments[0], "solution": i.segments[1]} for i in list(raw_items("math"))[:40]]
    c4 = [d["text"] for d in c4_docs[260:300]]
    model = load_model()
    math_scores = predict(model, [p["problem"] + "\n" + p["solution"] for p in problems])
    web_scores = predict(model, c4)
    assert (math_scores > 0.5).mean() >= 0.95 and (web_scores < 0.5).mean() >= 0.9
    table = pa.table({"text": [problems[0]["problem"], c4[0], None]})
    scored = stage_class("math_classifier_v1")({})(table).table
    result = stage_class("math_classifier_filter_v1")({"min_score": 0.5})(scored)
    assert result.table.column("text").to_pylist() == [problems[0]["problem"]]
    assert result.rejects.column("drop_reason").to_pylist() == ["low_math_score", "low_math_score"]
    path = tmp_path / "math.npz"
    save(model, path)
    again = stage_class("math_classifier_v1")({"model_path": str(path)})(table).table
    assert again.column("math__classifier_score").to_pylist() == scored.column("math__classifier_score").to_pylist()
    with pytest.raises(ConfigError, match="not found"):
        stage_class("math_classifier_v1")({"model_path": str(tmp_path / "nope.npz")})(table)
    (tmp_path / "bad.npz").write_bytes(b"not a model")
    with pytest.raises(ConfigError, match="not a model saved by corpus.math.classifier"):
        stage_class("math_classifier_v1")({"model_path": str(tmp_path / "bad.npz")})(table)


def test_shipped_model_matches_its_manifest():
    from corpus.math.classifier import DEFAULT_MODEL, SETTINGS

    manifest = json.loads(DEFAULT_MODEL.with_suffix(".json").read_text())
    assert manifest["sha256"] == hashlib.sha256(DEFAULT_MODEL.read_bytes()).hexdigest()
    assert manifest["settings"] == json.loads(json.dumps(SETTINGS))
    assert manifest["held_out"]["accuracy_at_0.5"] >= 0.97 and manifest["held_out"]["rows"] >= 500
    assert set(manifest["training_data"]["files"]) == {"gsm8k_train", "college_math", "olympiadbench", "minerva",
                                                       "mathqa", "c4", "wiki", "mmlu_dev"}
    # real pages (issue 25): the shipped Debian training pages and trafilatura's training third of sites
    pages = {p["file"]: p for p in manifest["training_data"]["pages"]}
    assert set(pages) == {"train_pages_debian.jsonl.zst", "math_train_pages_web.jsonl.zst"}
    debian = pages["train_pages_debian.jsonl.zst"]
    assert debian["sha256"] == hashlib.sha256(TRAIN_PAGES_DEBIAN.read_bytes()).hexdigest()
    assert {"debian/python-django-doc", "debian/python-pandas-doc", "debian/python-astropy-doc"} <= set(debian["by_source"])
    assert debian["by_source"]["debian/python-scipy-doc"]["math"] >= 100


@pytest.mark.slow
def test_training_from_the_data_folder_reproduces_the_shipped_model(shared_data, tmp_path):
    """The command that made the shipped artifact, rerun on the data it names, gives the same weights
    up to solver noise and the same held-out numbers."""
    import numpy as np

    from corpus.math.classifier import DEFAULT_MODEL, load_model, train_default

    from evals.data.build_math_train_pages import web_pool, write_pages

    write_pages(web_pool(), tmp_path / "math_train_pages_web.jsonl.zst")
    manifest = train_default(shared_data, tmp_path / "m.npz",
                             pages=[TRAIN_PAGES_DEBIAN, tmp_path / "math_train_pages_web.jsonl.zst"])
    shipped = json.loads(DEFAULT_MODEL.with_suffix(".json").read_text())
    assert manifest["training_data"] == shipped["training_data"] and manifest["held_out"] == shipped["held_out"]
    ours, theirs = load_model(str(tmp_path / "m.npz")), load_model()
    assert np.abs(ours.coef - theirs.coef).max() < 1e-3


@pytest.mark.slow
def test_math_filter_eval_reports_precision_and_recall(shared_data):
    from evals.data import math_filter

    report = math_filter.run(argparse.Namespace(threshold=0.5, real=False))
    rows = {r["method"]: r for r in report.tables["precision / recall"] if r["split"] == "dev"}
    assert next(v for k, v in rows.items() if k.startswith("tags (visible formulas"))["precision"] >= 0.9
    assert rows["classifier (text, p >= 0.5)"]["recall"] >= 0.95
    assert rows["(tags or symbols) and classifier"]["precision"] >= 0.95


@pytest.mark.slow
def test_math_demo_pipeline(tmp_path):
    from corpus.executors import run_pipeline
    from corpus.pipeline import load_pipeline

    outcome = run_pipeline(load_pipeline("configs/demo/60-math.yaml", overrides={"output.root": str(tmp_path)}),
                           progress=False)
    stats = {s.name: s for s in outcome.stats}
    assert stats["read"].rows_out == 50
    assert stats["math_filter_v1"].dropped["no_math"] >= 20  # the 20 C4 pages (and GSM8K word problems)
    table = outcome.version.read()
    origins = set(table.column("origin").to_pylist())
    assert origins <= {"MATH/qa", "MATH/mathjax2", "MATH/katex", "MATH/bare"} and "MATH/qa" in origins
    qa = [t for t, o in zip(table.column("text").to_pylist(), table.column("origin").to_pylist()) if o == "MATH/qa"]
    assert qa and all("Answer (accepted, score" in t and "Answer (score -1):" in t for t in qa)
