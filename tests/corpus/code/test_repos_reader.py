"""The repos reader: folders of repositories and tables of files, one row per file with what the license
stage reads (`license_inputs`); the license and the language are decided by their stages."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pytest

from corpus.readers import InputFile, make_reader
from manifests.errors import ConfigError
from manifests.storage import Location
from tests.conftest import SAMPLES, write_jsonl


def _read(path, options=None):
    errors = []
    reader = make_reader("repos", options or {})
    tables = list(reader.read(InputFile(Location.parse(str(path)), "in"), batch_rows=7, on_record_error=errors.append))
    rows = [r for t in tables for r in t.to_pylist()]
    return rows, errors, tables


def _decided(tables):
    """Rows after code_language_v1 (any language) and code_license_v1, and the license rejects by source."""
    from corpus.registry import stage_class

    kept, rejects = [], {}
    for table in tables:
        out = stage_class("code_language_v1")({"languages": None})(table)
        result = stage_class("code_license_v1")({})(out.table)
        kept += result.table.to_pylist()
        if result.rejects is not None:
            rejects.update({r["source"]: r for r in result.rejects.to_pylist()})
    return kept, rejects


@pytest.mark.usefixtures("shared_data")
def test_folder_of_repositories_gives_one_row_per_file_and_the_stages_decide():
    rows, errors, tables = _read(SAMPLES / "code" / "repos")
    assert not errors
    by_source = {r["source"]: r for r in rows}
    assert len(rows) == 31 and len(by_source) == 31 and len({r["id"] for r in rows}) == 31
    assert {"license", "language"}.isdisjoint(rows[0])  # the reader reads; the stages decide
    inputs = json.loads(by_source["pallets__click:src/click/_utils.py"]["license_inputs"])
    assert sorted(inputs["files"]) == ["LICENSE.txt"] and "src/click/_utils.py" not in inputs["files"]
    assert tables[0].schema.field("license_inputs").type == pa.dictionary(pa.int32(), pa.string())
    kept, rejects = _decided(tables)
    by_source = {r["source"]: r for r in kept}
    click = by_source["pallets__click:src/click/_utils.py"]
    assert (click["repository"], click["path"], click["language"], click["license"]) == \
        ("pallets__click", "src/click/_utils.py", "Python", "BSD-3-Clause")
    assert "license_inputs" not in click
    assert by_source["BurntSushi__ripgrep:build.rs"]["license"] in ("MIT OR Unlicense", "Unlicense OR MIT")
    meter = rejects["demo__gpl-meter:src/meter.c"]
    assert meter["drop_reason"] == "license:GPL-2.0-or-later"
    assert json.loads(meter["drop_detail"])["repository"]["expression"] == "GPL-2.0-or-later"
    assert rejects["demo__no-license:wordcount.py"]["drop_reason"] == "license:unknown"
    again, _, _ = _read(SAMPLES / "code" / "repos")
    assert [r["id"] for r in again] == [r["id"] for r in rows]  # stable ids


def test_one_repository_binary_and_large_files_are_counted(tmp_path, shared_data):
    repo = tmp_path / "tool"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "main.go").write_text("package main\n\nfunc main() {}\n")
    (repo / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (repo / "big.txt").write_text("x" * 5000)
    (repo / ".git").mkdir()
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    shutil.copy(shared_data / "licenses/licensee/spec/fixtures/mit/LICENSE.txt", repo / "LICENSE.txt")
    rows, errors, tables = _read(repo, {"repo_depth": 0, "max_file_bytes": 4000})
    assert sorted(r["path"] for r in rows) == ["LICENSE.txt", "src/main.go"]
    assert rows[-1]["repository"] == "tool"
    assert sorted(e.reason.split(":")[0] for e in errors) == ["binary", "too_large"]
    kept, _ = _decided(tables)
    assert [(r["path"], r["license"]) for r in kept] == [("src/main.go", "MIT")]


def test_table_of_files_detects_per_repository_or_uses_a_license_column(tmp_path, shared_data):
    base = shared_data / "code_licensed"
    records = []
    for line in (base / "manifest.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["repo"] in ("pallets/click", "ranger/ranger") and len(records) < 40:
            records.append({"repository": row["repo"], "path": row["path"], "text": (base / row["file"]).read_text(),
                            "spdx": row["repo_license_spdx"]})
    for repo, folder in (("pallets/click", "pallets__click"), ("ranger/ranger", "ranger__ranger")):
        lic = next((base / "files" / folder).glob("_REPO_LICENSE_*"))
        records.append({"repository": repo, "path": "LICENSE", "text": lic.read_text(), "spdx": None})
    path = write_jsonl(tmp_path / "files.jsonl.gz", records, compress="gz")
    rows, errors, tables = _read(path)
    assert not errors and len(rows) == len(records)
    assert rows[0]["source"] == f"{rows[0]['repository']}:{rows[0]['path']}"
    kept, rejects = _decided(tables)
    assert {r["repository"]: r["license"] for r in kept} == {"pallets/click": "BSD-3-Clause"}
    assert {r["drop_reason"] for s, r in rejects.items() if s.startswith("ranger/ranger:")} == {"license:GPL-3.0-only"}
    given, _, _ = _read(path, {"license_field": "spdx"})
    assert {r["license"] for r in given if r["path"] == "LICENSE"} == {"unknown"}
    assert {r["license"] for r in given if r["path"] != "LICENSE"} == {"BSD-3-Clause", "GPL-3.0-only"}
    assert all("license_inputs" not in r for r in given)


def test_bad_options_fail_before_work():
    with pytest.raises(ConfigError, match="repo_depth"):
        make_reader("repos", {"repo_depth": 9})
    with pytest.raises(ConfigError, match="did you mean 'repo_depth'"):
        make_reader("repos", {"repo_dept": 1})


def test_a_change_inside_a_repository_folder_changes_the_run_key(tmp_path):
    from corpus.pipeline import describe_plan, load_pipeline

    (tmp_path / "repos" / "one").mkdir(parents=True)
    (tmp_path / "repos" / "one" / "a.py").write_text("print(1)\n")
    pipeline = load_pipeline({"name": "code", "input": {"format": "repos", "paths": [str(tmp_path / "repos")]},
                              "output": {"root": str(tmp_path / "root")}, "stages": ["code_language_v1"]})
    before = pipeline.run_key(pipeline.inputs())
    (tmp_path / "repos" / "one" / "b.py").write_text("print(2)\n")
    assert pipeline.run_key(pipeline.inputs()) != before
    assert "1 input files" in describe_plan(pipeline)
