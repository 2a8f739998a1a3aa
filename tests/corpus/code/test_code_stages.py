"""Code stages: license/language filters, quality heuristics, secrets, the licensed-dataset selection,
and the code demo pipeline end to end."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from corpus.registry import stage_class
from tests.conftest import SAMPLES

REPOS = SAMPLES / "code" / "repos"


def _stage(name, options=None):
    return stage_class(name)(options or {})


def test_code_license_drops_with_the_license_as_reason():
    table = pa.table({"text": ["x"] * 7, "license": [
        "MIT", "GPL-3.0-only", "unknown", "MIT OR GPL-2.0-only", "Apache-2.0 AND GPL-2.0-only", None, "CC-BY-4.0"]})
    result = _stage("code_license_v1")(table)
    assert result.table.column("license").to_pylist() == ["MIT", "MIT OR GPL-2.0-only", "CC-BY-4.0"]
    assert result.rejects.column("drop_reason").to_pylist() == [
        "license:GPL-3.0-only", "license:unknown", "license:Apache-2.0 AND GPL-2.0-only", "license:unknown"]
    narrow = _stage("code_license_v1", {"allow": ["Apache-*"]})(table)
    assert narrow.stats.rows_out == 0


@pytest.mark.slow  # builds the license index on a cold cache (~25 s)
def test_license_select_on_a_real_dataset_license_column(shared_data):
    path = shared_data / "benchmarks/math_eval_harness/college_math/test.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    table = pa.table({"text": [r["question"] for r in rows], "license": [r["license"] for r in rows]})
    result = _stage("license_select_v1")(table)
    kept = {}
    for lic in result.table.column("license").to_pylist():
        kept[lic] = kept.get(lic, 0) + 1
    # only the CC BY names are kept; NC-SA, GFDL, bare "Creative Commons License" and custom terms drop
    assert kept == {"Creative Commons Attribution 3.0 Unported License (CC BY 3.0)": 1000,
                    "Creative Commons Attribution License (CC BY)": 123}
    assert result.stats.dropped["license:unknown"] == 500 + 137 + 101  # unversioned CC, "(CC BY)" alone, custom
    assert result.stats.dropped["license:GFDL-1.1-or-later"] == 148
    assert sum(result.stats.dropped.values()) == len(rows) - 1123


def test_language_filter():
    table = pa.table({"text": ["#!/usr/bin/env python3\nprint(1)\n", "a", "b", "c"],
                      "path": ["bin/tool", "README.md", "main.swift", "x.lua"]})
    result = _stage("code_language_v1")(table)
    assert result.table.column("path").to_pylist() == ["bin/tool", "main.swift"]
    assert result.rejects.column("drop_reason").to_pylist() == ["not_code", "language:Lua"]
    assert _stage("code_language_v1", {"languages": None})(table).stats.rows_out == 3


def test_quality_heuristics_on_the_demo_files():
    paths = ["web/bundle.min.js", "gen/messages_pb2.py", "data/weights.py", "app/uploader.py"]
    texts = [(REPOS / "demo__mixed-quality" / p).read_text() for p in paths]
    texts.append((REPOS / "pallets__click" / "src/click/_utils.py").read_text())
    table = pa.table({"text": texts, "path": paths + ["click/_utils.py"]})
    scored = _stage("code_quality_score_v1")(table).table
    assert scored.column("code__max_line_chars")[0].as_py() > 1000
    assert scored.column("code__is_generated").to_pylist() == [False, True, False, False, False]
    result = _stage("code_quality_v1")(scored)
    assert result.table.column("path").to_pylist() == ["app/uploader.py", "click/_utils.py"]
    assert result.rejects.column("drop_reason").to_pylist() == ["long_line", "generated", "data_file"]
    assert _stage("code_quality_v1")(table).stats.dropped == result.stats.dropped  # computes columns itself


@pytest.mark.slow
def test_code_demo_pipeline(tmp_path, shared_data):
    from corpus.executors import run_pipeline
    from corpus.pipeline import load_pipeline

    pipeline = load_pipeline("configs/demo/50-code.yaml", overrides={"output.root": str(tmp_path)})
    outcome = run_pipeline(pipeline, progress=False)
    stats = {s.name: s for s in outcome.stats}
    assert stats["code_language_v1"].dropped == {"not_code": 7}
    assert stats["code_license_v1"].dropped == {"license:GPL-2.0-or-later": 1, "license:unknown": 1}
    assert stats["code_quality_v1"].dropped == {"data_file": 1, "generated": 1, "long_line": 1}
    assert outcome.version.manifest.rows == 19
    table = outcome.version.read()
    assert set(table.column("license").to_pylist()) == {"BSD-3-Clause", "MIT", "Apache-2.0", "MIT OR Unlicense"}


@pytest.mark.slow
def test_licensed_dataset_pipeline_selects_by_license_then_applies_pii(tmp_path, shared_data):
    """Item 8: a public dataset with a license column (college_math: textbook exercises under CC BY,
    CC BY-NC-SA, GFDL and custom terms) -> keep the permissive ones -> PII stage."""
    from corpus.executors import run_pipeline
    from corpus.pipeline import load_pipeline

    pii = [{"pii_v3": {}}]
    pipeline = load_pipeline({
        "name": "college-math-licensed",
        "input": {"format": "jsonl", "paths": [str(shared_data / "benchmarks/math_eval_harness/college_math/test.jsonl")],
                  "options": {"text_field": "question", "columns": ["license", "data_source"]}},
        "output": {"root": str(tmp_path)},
        "executor": {"kind": "local", "workers": 1},
        "stages": [{"license_select_v1": {"field": "license"}}, *pii],
    })
    outcome = run_pipeline(pipeline, progress=False)
    stats = {s.name: s for s in outcome.stats}
    assert stats["license_select_v1"].rows_out == 1123
    assert outcome.version.manifest.rows == 1123
