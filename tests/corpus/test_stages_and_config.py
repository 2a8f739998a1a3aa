"""Stage contract and config validation: exact drops with reasons, errors that name the fix."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from corpus.pipeline import load_pipeline
from corpus.registry import stage_class
from corpus.stage import DROP_DETAIL, DROP_REASON, DROP_STAGE
from manifests import ConfigError


def _t(texts):
    return pa.table({"id": [str(i) for i in range(len(texts))], "source": ["s"] * len(texts), "text": texts})


def test_text_length_drops_exact_rows_with_reasons():
    stage = stage_class("text_length_v1")({"min_chars": 10, "max_chars": 40, "min_words": 3})
    r = stage(_t(["short", "two words here ok", "x" * 50, "onlyonelongwordxx", None]))
    assert r.table.column("id").to_pylist() == ["1"]
    assert dict(zip(r.rejects.column("id").to_pylist(), r.rejects.column(DROP_REASON).to_pylist())) == {
        "0": "too_short", "2": "too_long", "3": "too_few_words", "4": "too_short"}
    assert set(r.rejects.column(DROP_STAGE).to_pylist()) == {"text_length_v1"}
    assert r.stats.rows_in == 5 and r.stats.rows_out == 1
    assert r.stats.dropped == {"too_short": 2, "too_long": 1, "too_few_words": 1}


def test_normalize_text_cleans_and_drops_empty():
    stage = stage_class("normalize_text_v1")({"max_blank_lines": 1})
    r = stage(_t(["  Cafe\u0301\r\n\r\n\r\n\r\nnext\t\tline \x07", " \n\t ", "ok"]))
    assert r.table.column("text").to_pylist() == ["Caf\u00e9\n\nnext line", "ok"]
    assert r.rejects.column(DROP_REASON).to_pylist() == ["empty_text"]
    assert r.rejects.column("text").to_pylist() == [" \n\t "]  # rejects show the row as it came in


def test_normalize_text_equals_the_plain_arrow_kernels():
    """The cheaper paths (a quick check before normalising, regexes that skip what does not change) give
    exactly what pyarrow's kernels give with the plain patterns, on real text and on random whitespace."""
    import gzip
    import json
    import random

    from corpus.stages.text import normalize_unicode

    with gzip.open(Path(__file__).parents[2] / "data/samples/c4/c4_demo.jsonl.gz", "rt", encoding="utf-8") as f:
        real = [json.loads(line)["text"] for line in f][:300]
    odd = [None, "", "Cafe\u0301", "\ufb01ne \u212b \u2460", "plain ascii", "\u1e9b\u0323", "e\u0301\u00e9"]
    column = pa.chunked_array([pa.array(real[:150] + odd), pa.array(real[150:])])
    for form in ("NFC", "NFKC", "NFD", "NFKD"):
        assert normalize_unicode(column, form).equals(pc.utf8_normalize(column, form)), form
    ascii_only = pa.chunked_array([pa.array(["abc", None, "x y"])])
    assert normalize_unicode(ascii_only, "NFC") is ascii_only  # nothing to do: the column itself

    rng = random.Random(0)
    fuzz = ["".join(rng.choice(" \t\u00a0\nab") for _ in range(rng.randint(0, 24))) for _ in range(5000)]
    stage = stage_class("normalize_text_v1")({"form": "none", "strip_control_chars": False, "max_blank_lines": 30,
                                              "drop_empty": False})
    for texts in (fuzz, real):
        expected = pc.replace_substring_regex(pa.array(texts), r"[ \t\x{00a0}]+", " ")
        expected = pc.replace_substring_regex(expected, r" *\n *", "\n")
        expected = pc.replace_substring_regex(expected, r"\n{32,}", "\n" * 31)
        assert stage(_t(texts)).table.column("text").to_pylist() == pc.utf8_trim_whitespace(expected).to_pylist()


def test_http_response_filter():
    stage = stage_class("http_response_v1")({})
    t = pa.table({"id": ["a", "b", "c", "d"], "http_status": pa.array([200, 404, 200, None], pa.int32()),
                  "content_type": ["text/html; charset=UTF-8", "text/html", "image/png", "text/html"]})
    r = stage(t)
    assert r.table.column("id").to_pylist() == ["a"]
    assert r.rejects.column(DROP_REASON).to_pylist() == ["bad_status", "bad_mime", "bad_status"]


def test_stage_config_errors_name_key_stage_and_fix():
    with pytest.raises(ConfigError, match=r"unknown key 'min_char' in stage text_length_v1; did you mean 'min_chars'\?"):
        stage_class("text_length_v1")({"min_char": 3})
    with pytest.raises(ConfigError, match=r"min_chars must be >= 0; got -3 in stage text_length_v1"):
        stage_class("text_length_v1")({"min_chars": -3})
    with pytest.raises(ConfigError, match=r"min_chars in stage text_length_v1: expected an integer, got 'ten'"):
        stage_class("text_length_v1")({"min_chars": "ten"})
    with pytest.raises(ConfigError, match=r"form in stage normalize_text_v1: 'nfc' is not one of .*did you mean 'NFC'"):
        stage_class("normalize_text_v1")({"form": "nfc"})
    with pytest.raises(ConfigError, match=r"unknown stage 'text_lenght_v1'; did you mean 'text_length_v1'"):
        stage_class("text_lenght_v1")


def test_misspelt_yaml_key_fails_before_any_work(tmp_path):
    cfg = tmp_path / "p.yaml"
    cfg.write_text("name: x\ninput: {format: jsonl, paths: [nothing-here/*.jsonl]}\n"
                   "executor: {kind: local, wokers: 2}\nstages: [text_length_v1]\n")
    with pytest.raises(ConfigError, match=r"unknown key 'wokers' in .*p.yaml executor; did you mean 'workers'"):
        load_pipeline(str(cfg))
    cfg.write_text("name: x\ninput: {format: jsonl, paths: [a.jsonl]}\nstagse: []\n")
    with pytest.raises(ConfigError, match=r"unknown key 'stagse'.*did you mean 'stages'"):
        load_pipeline(str(cfg))
    cfg.write_text("name: x\ninput: {format: jsonl, paths: [a.jsonl], options: {text_feild: body}}\n"
                   "stages: [text_length_v1]\n")
    with pytest.raises(ConfigError, match=r"unknown key 'text_feild' in input \(format jsonl\); did you mean 'text_field'"):
        load_pipeline(str(cfg))
    assert not (tmp_path / "data").exists()


def test_a_stage_module_that_fails_to_import_is_an_error_unless_an_extra_is_missing(monkeypatch):
    """Degrade loudly: a broken import of our own code stops the lookup; a missing optional package is
    remembered and named (corpus/registry.py)."""
    import importlib

    from corpus import registry

    real = importlib.import_module

    def fake(name, *args):
        if name == "corpus.stages.text":
            raise ModuleNotFoundError("No module named 'corpus.nothing'", name="corpus.nothing")
        if name == "corpus.stages.web_lang":
            raise ModuleNotFoundError("No module named 'fasttext_x'", name="fasttext_x")
        return real(name, *args)

    monkeypatch.setattr(registry, "_loaded", False)
    monkeypatch.setattr(registry, "_IMPORT_FAILURES", {})
    monkeypatch.setattr(registry.importlib, "import_module", fake)
    with pytest.raises(ModuleNotFoundError, match="corpus.nothing"):
        registry._load_all()
    monkeypatch.setattr(registry, "_loaded", False)

    def only_optional(name, *args):
        if name == "corpus.stages.web_lang":
            raise ModuleNotFoundError("No module named 'fasttext_x'", name="fasttext_x")
        return real(name, *args)

    monkeypatch.setattr(registry.importlib, "import_module", only_optional)
    registry._load_all()
    assert registry._IMPORT_FAILURES == {"corpus.stages.web_lang": "No module named 'fasttext_x'"}
    monkeypatch.setattr(registry, "_loaded", False)  # the next lookup loads everything for real


LAZY = """
import sys
from corpus.registry import all_stages, stage_class
from corpus.stages.web_extract import WebExtract
print(stage_class("web_extract_v1") is WebExtract, "synth.stages.sft_judge" in sys.modules,
      "corpus.stages.math_qa" in sys.modules)
try:
    stage_class("web_extract_v9")
except Exception as exc:
    print(type(exc).__name__, "did you mean 'web_extract_v1'" in str(exc))
print(len(all_stages()) > 50, "synth.stages.sft_judge" in sys.modules)
"""


def test_a_lookup_imports_only_the_module_that_defines_the_stage():
    """corpus/registry.py: one stage's lookup does not import every stage module; an unknown name still
    loads them all and suggests the closest, and `all_stages` still lists every stage."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", LAZY], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:3] == ["True False False", "ConfigError True", "True True"]


def test_threshold_filters_share_one_rule_and_keep_their_decisions():
    """The generic ThresholdFilter: below the threshold drops with the stage's reason; nulls as it says.
    The reasons are what the hand-written filters gave (the reference is written out here, per row)."""
    import pyarrow as pa

    from corpus.stages.math_classifier import MathClassifierFilter
    from corpus.stages.quality_classifier import QualityThreshold
    from synth.stages.sft_judge import JudgeThreshold

    t = pa.table({"quality__score": pa.array([0.9, 0.5, 0.49, None], pa.float32()),
                  "math__classifier_score": pa.array([0.1, 0.7, None, 0.5], pa.float32()),
                  "judge__score": pa.array([7, 5, None, 6], pa.int32())})
    q = QualityThreshold({"min_score": 0.5, "column": "quality__score"}).reasons(t).to_pylist()
    assert q == [None, None, "low_quality_score", "low_quality_score"]
    m = MathClassifierFilter({"min_score": 0.5}).reasons(t).to_pylist()
    assert m == ["low_math_score", None, "low_math_score", None]
    j = JudgeThreshold({"min_score": 6}).reasons(t).to_pylist()
    assert j == [None, "judge_below_threshold", "judge_unparsed", None]
    j_keep = JudgeThreshold({"min_score": 6, "drop_unparsed": False}).reasons(t).to_pylist()
    assert j_keep == [None, "judge_below_threshold", None, None]
    with pytest.raises(ConfigError, match="put math_classifier_v1 before it"):
        MathClassifierFilter({}).reasons(pa.table({"x": [1]}))


def test_a_threshold_drop_carries_the_measured_value_and_the_threshold():
    import json

    from corpus.stages.quality_classifier import QualityThreshold

    t = pa.table({"id": ["a", "b", "c"], "quality__score": pa.array([0.9, 0.25, None], pa.float64())})
    r = QualityThreshold({"min_score": 0.5, "column": "quality__score"})(t)
    assert r.rejects.column("id").to_pylist() == ["b", "c"]
    assert [json.loads(d) for d in r.rejects.column(DROP_DETAIL).to_pylist()] == [
        {"column": "quality__score", "value": 0.25, "min": 0.5},
        {"column": "quality__score", "value": None, "min": 0.5}]


def test_drop_details_must_match_the_rows():
    from corpus.stage import drop_by_reason

    t = _t(["a", "b", "c"])
    r = drop_by_reason("x_v1", t, pa.array([None, "bad", "bad"]), details=[None, '{"n": 1}', '{"n": 2}'])
    assert r.rejects.column(DROP_DETAIL).to_pylist() == ['{"n": 1}', '{"n": 2}']
    with pytest.raises(RuntimeError, match="x_v1: returned 2 details for 3 rows"):
        drop_by_reason("x_v1", t, pa.array([None, "bad", "bad"]), details=["{}", "{}"])


def test_a_resource_a_stage_reads_is_hashed_into_its_description(tmp_path):
    """Changing a word list / model file / domain list changes describe() (so the run key), with no
    config change; a stage reading nothing keeps its plain description."""
    import hashlib

    from corpus.registry import stage_class

    domains = tmp_path / "domains.txt"
    domains.write_text("# test list\nexample.org allow\n")
    stage = stage_class("math_domains_v1")({"domains_file": str(domains)})
    first = stage.describe()
    assert first["resources"] == {"domains": hashlib.sha256(domains.read_bytes()).hexdigest()}
    domains.write_text("# test list\nexample.org deny\n")
    assert stage.describe()["resources"]["domains"] != first["resources"]["domains"]
    assert stage.describe()["config"] == first["config"]
    assert "resources" in stage_class("math_signals_v1")({}).describe()
    assert set(stage_class("web_safety_v3")({}).describe()["resources"]) == {"web_data", "safety_model", "safety_model_manifest"}
    assert "resources" not in stage_class("text_length_v1")({}).describe()


def test_the_mathml_fallback_is_counted_in_the_stage_counters():
    """MathML the stylesheet cannot take falls back to its text, and the stage's stats count it."""
    import pyarrow as pa

    from corpus.registry import stage_class

    good = "<html><body><p>x <math><mi>a</mi><mo>+</mo><mi>b</mi></math> done</p></body></html>"
    # a namespace prefix that is never declared: the MathML cannot be parsed as XML by the stylesheet
    broken = "<html><body><p>y <math><m:mi>a</m:mi><mo>=</mo><mn>1</mn></math> end</p></body></html>"
    stage = stage_class("math_signals_v1")({})
    out = stage(pa.table({"id": ["1", "2"], "text": [good, broken]}))
    assert out.stats.counters.get("mathml_text_fallback", 0) >= 1
    clean = stage(pa.table({"id": ["1"], "text": [good]}))
    assert "mathml_text_fallback" not in clean.stats.counters
