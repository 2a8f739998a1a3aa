"""Language id: exact rows and reasons (safety: test_safety.py; PII: tests/corpus/pii)."""

from __future__ import annotations

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

