"""Quality classifier: train from two catalog versions, the artifact's manifest, scorer + threshold."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from corpus.classify.model import QualityModel, TrainParams
from corpus.classify.raw_text import html_to_raw_text
from corpus.classify.train import train_classifier
from corpus.executors import run_pipeline
from corpus.pipeline import load_pipeline
from corpus.registry import stage_class
from manifests import Catalog
from manifests.errors import ConfigError

from ...conftest import REPO


@pytest.fixture(scope="module")
def trained(tmp_path_factory, c4_docs):
    root = tmp_path_factory.mktemp("root")
    catalog = Catalog(str(root))
    catalog.write_table("clean", pa.table({"id": [f"c{i}" for i in range(len(c4_docs))],
                                           "text": [d["text"] for d in c4_docs]}))
    html = run_pipeline(load_pipeline({
        "name": "pages", "input": {"format": "warc", "paths": [str(REPO / "data/samples/*_warc/*.warc.gz")]},
        "output": {"root": str(root)}, "executor": {"kind": "local", "workers": 1},
        "stages": [{"http_response_v1": {}}]}), progress=False).version
    model = train_classifier(catalog, positive="clean", negative="pages", negative_field="content",
                             out="q", params=TrainParams(bits=16))
    return root, catalog, model, html


def test_raw_text_keeps_boilerplate_but_not_markup_or_scripts():
    html = b"<html><head><style>p{}</style><script>var x=1;</script></head><body><nav>Home | About</nav>" \
           b"<!-- c --><p>Hello &amp; welcome</p></body></html>"
    assert html_to_raw_text(pa.array([html, None])).to_pylist() == ["Home | About Hello & welcome", None]


def test_training_writes_a_versioned_artifact_with_data_versions_and_heldout_accuracy(trained):
    root, catalog, model, html = trained
    m = model.manifest
    assert m["kind"] == "cidermill.hashed_ngram_logistic" and m["params"]["bits"] == 16
    assert m["training_data"]["positive"] == {"name": "clean", "version_id": catalog.resolve("clean").version_id,
                                              "rows": 300}
    assert m["training_data"]["negative"]["version_id"] == html.version_id
    assert m["training_data"]["negative"]["rows"] > 100  # pages cut into 300-word chunks
    assert m["metrics"]["heldout_rows"] > 50
    assert m["metrics"]["heldout_accuracy"] >= 0.85
    on_disk = json.loads((root / "models" / "q" / m["version_id"][:16] / "manifest.json").read_text())
    assert on_disk["version_id"] == m["version_id"]


def test_scorer_and_threshold_filter(trained, c4_docs):
    root, _, model, _ = trained
    scorer = stage_class("quality_classifier_v1")({"model": "q", "models_root": str(root)})
    nav = "Home | About | Contact | Login | Sign up | Cart (0) | Search " * 12
    table = pa.table({"id": ["a", "b"], "text": [c4_docs[5]["text"], nav]})
    scored = scorer(table).table
    s = scored.column("quality__classifier_score").to_pylist()
    assert s[0] > 0.5 > s[1]
    assert scorer.describe()["model_version"] == model.manifest["version_id"]
    res = stage_class("quality_classifier_filter_v1")({"min_score": 0.5})(scored)
    assert res.table.column("id").to_pylist() == ["a"]
    assert res.rejects.column("drop_reason").to_pylist() == ["low_quality_score"]


def test_missing_or_tampered_model_is_a_config_error(trained, tmp_path):
    root, _, model, _ = trained
    with pytest.raises(ConfigError, match="train-classifier"):
        stage_class("quality_classifier_v1")({"model": "nope", "models_root": str(root)})
    import shutil

    copy = tmp_path / "m"
    shutil.copytree(model.manifest["path"], copy)
    (copy / "model.npz").write_bytes((copy / "model.npz").read_bytes()[:-10])
    with pytest.raises(ConfigError, match="does not match"):
        QualityModel.load(copy)
