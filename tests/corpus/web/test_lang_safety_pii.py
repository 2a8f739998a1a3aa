"""Language id, safety scores and filter: exact rows and reasons (PII: tests/corpus/pii)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from corpus.registry import stage_class

from .conftest import c4_texts, table_of


def test_language_id_and_filter_reasons():
    texts = [c4_texts()[0], "Dies ist ein ganz normaler deutscher Satz über das Wetter in Berlin.", "", None]
    scored = stage_class("web_lang_v1")({})(table_of(texts))
    langs = scored.table.column("lang").to_pylist()
    assert langs[:2] == ["en", "de"] and langs[2:] == [None, None]
    assert scored.table.column("lang_score").to_pylist()[0] > 0.65
    result = stage_class("lang_filter_v1")({"languages": ["en"]})(scored.table)
    assert result.table.column("id").to_pylist() == ["d0"]
    assert result.rejects.column("drop_reason").to_pylist() == ["wrong_language"] * 3


def test_safety_columns_and_filter_decisions():
    texts = [c4_texts()[1],
             "how do I hurt someone badly and steal their money without the police finding out",
             "You stupid fucking bitch, shit, go fuck yourself asshole.",
             c4_texts()[2], c4_texts()[3]]
    urls = ["http://news.example.com/a", "http://forum.example.org/b", "http://chat.example.net/c",
            "https://www.pornhub.com/view", "http://example.com/free-porn-videos"]
    scored = stage_class("web_safety_v1")({})(table_of(texts, url=pa.array(urls)))
    t = scored.table
    assert t.column("safety__badwords").to_pylist()[2] >= 5
    assert t.column("safety__url_blocked").to_pylist() == [False, False, False, True, False]
    assert t.column("safety__url_badwords").to_pylist() == [False, False, False, False, True]
    score = t.column("safety__score").to_pylist()
    assert score[1] > 0.8 > 0.5 > score[0]
    result = stage_class("web_safety_filter_v1")({"max_badwords_ratio": 0.05, "max_score": 0.8})(t)
    assert result.table.column("id").to_pylist() == ["d0"]
    reasons = dict(zip(result.rejects.column("id").to_pylist(), result.rejects.column("drop_reason").to_pylist()))
    assert reasons["d1"] == "unsafe_score" and reasons["d3"] == "blocked_domain" and reasons["d4"] == "url_badwords"
    assert reasons["d2"] in ("badwords_ratio", "unsafe_score")


def test_safety_model_is_mostly_quiet_on_clean_c4():
    texts = c4_texts()
    scored = stage_class("web_safety_v1")({})(table_of(texts))
    scores = scored.table.column("safety__score").to_pylist()
    assert sum(s > 0.9 for s in scores) <= 3


@pytest.mark.slow
def test_safety_model_retrains_from_project_data(tmp_path, shared_data_dir):
    from corpus.web import safety_model

    metrics = safety_model.train(tmp_path / "m.npz", shared_data_dir)
    assert metrics["test_auc"] > 0.95 and metrics["unsafe_rows"] == 2312
    assert safety_model.score(["how can I poison my neighbor's dog"], tmp_path / "m.npz")[0] > 0.5


@pytest.fixture
def shared_data_dir(shared_data):
    return shared_data
