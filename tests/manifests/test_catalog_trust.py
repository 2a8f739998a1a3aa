"""Issue 35, the catalog and configs: nothing unverified is followed or listed, leftovers of a killed
publish go, a keyed digest catches a re-signed edit; bad configs are one line before any work."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

from manifests import Catalog, ConfigError, DatasetVersion, ManifestError
from manifests.config import Count, build_config, parse_count
from manifests.main import main as cidermill
from manifests.manifest import DIGEST_FIELD, MANIFEST_NAME, manifest_digest
from manifests.names import validate_name
from manifests.overrides import parse_assignment, read_yaml
from manifests.signing import HMAC_FIELD, KEY_ENV
from manifests.storage import Location


def _table(tag: str, n: int = 3) -> pa.Table:
    return pa.table({"id": [f"{tag}{i}" for i in range(n)], "text": [f"{tag} document {i}" for i in range(n)]})


def _mpath(root: Path, v) -> Path:
    return root / v.name / f"{v.version_id}.{MANIFEST_NAME}"


def _vdir(root: Path, v) -> Path:
    return root / v.name / v.version_id


# ---- LATEST and references ---------------------------------------------------------------------
@pytest.mark.parametrize("content", ["../../../etc", "/etc/passwd", "not-an-id", "OTHER"])
def test_an_edited_latest_is_refused_not_followed(tmp_path, content):
    cat = Catalog(tmp_path)
    cat.write_table("docs", _table("a"))
    other = cat.write_table("other", _table("b"))
    (tmp_path / "docs" / "LATEST").write_text(other.version_id if content == "OTHER" else content)
    with pytest.raises(ManifestError, match=r"docs/LATEST (holds .*, not a version id|names [0-9a-f]{12}, which is not "
                                            r"a version of 'docs')"):
        cat.resolve("docs")


def test_a_version_directory_copied_under_another_name_or_id_is_not_listed(tmp_path):
    import shutil

    cat = Catalog(tmp_path)
    a = cat.write_table("docs", _table("a"))
    (tmp_path / "stolen").mkdir()
    shutil.copytree(tmp_path / "docs" / a.version_id, tmp_path / "stolen" / a.version_id)
    shutil.copy(_mpath(tmp_path, a), tmp_path / "stolen")
    skipped = []
    assert [e.name for e in cat.versions(skipped=skipped)] == ["docs"]
    assert "the manifest is for docs@" in skipped[0].reason and "stolen" in skipped[0].reason


@pytest.mark.parametrize("ref", ["", "  ", "docs@", "docs@xyz", "@abc"])
def test_empty_or_malformed_references_name_no_version(tmp_path, ref):
    cat = Catalog(tmp_path)
    cat.write_table("docs", _table("a"))
    with pytest.raises((ManifestError, ConfigError)):
        cat.resolve(ref)


def test_data_show_of_an_empty_reference_is_one_line_and_exit_1(tmp_path, capsys):
    Catalog(tmp_path).write_table("docs", _table("a"))
    assert cidermill(["data", "--root", str(tmp_path), "show", ""]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: an empty dataset reference names no version") and "\n" not in err


# ---- one bad manifest does not hide the others --------------------------------------------------
@pytest.mark.parametrize("bad", [
    b"{not json", b"\xff\xfe\x00garbage", b"[]", json.dumps({"schema_version": [2]}).encode(),
    json.dumps({"schema_version": 1, "name": "x", "version_id": "0" * 64, "shards": {"a": 1}}).encode(),
    json.dumps({"schema_version": 1, "name": "bad", "version_id": "0" * 64, "created_at": None, "shards": [],
                "schema": {"arrow_ipc_b64": "!!"}}).encode(),
])
@pytest.mark.parametrize("legacy", [False, True], ids=["beside", "inside(older layout)"])
def test_one_malformed_manifest_does_not_break_ls_for_the_others(tmp_path, capsys, bad, legacy):
    cat = Catalog(tmp_path)
    cat.write_table("docs", _table("a"))
    broken = tmp_path / "bad" / ("0" * 64)
    broken.mkdir(parents=True)
    mpath = broken / MANIFEST_NAME if legacy else tmp_path / "bad" / f"{'0' * 64}.{MANIFEST_NAME}"
    mpath.write_bytes(bad)
    assert [e.name for e in cat.versions()] == ["docs"]
    assert cidermill(["data", "--root", str(tmp_path), "ls"]) == 0
    out = capsys.readouterr()
    assert "docs" in out.out
    assert out.err.count("\n") == 1 and out.err.startswith(f"warning: not listed: {mpath}: ")


# ---- a publish killed midway ---------------------------------------------------------------------
def test_a_successful_publish_clears_what_a_killed_publish_left(tmp_path):
    cat = Catalog(tmp_path)
    a = cat.write_table("docs", _table("a"))
    vdir = tmp_path / "docs" / a.version_id
    # what `kill -9` inside write_bytes_atomic and inside _place leaves behind
    (tmp_path / "docs" / "LATEST.tmp-4242-deadbeef").write_text("x")
    (tmp_path / "docs" / f"{'f' * 64}.manifest.json.tmp-4242-cafebabe").write_text("{")
    (vdir / "manifest.json.tmp-4242-cafebabe").write_text("{")  # the older layout wrote it inside the folder
    orphan = tmp_path / "docs" / ("e" * 64)
    (orphan / "shards").mkdir(parents=True)
    (orphan / "shards" / "part-00000-000.parquet").write_bytes(b"half moved")
    cat.write_table("docs", _table("b"))
    left = [str(p) for p in tmp_path.rglob("*") if ".tmp-" in p.name]
    assert left == [] and not orphan.exists()
    assert len(cat.versions("docs")) == 2 and cat.resolve(f"docs@{a.version_id[:12]}").verify() == []


# ---- a keyed digest -------------------------------------------------------------------------------
def _resign_sha256(path: Path, edit) -> None:
    raw = json.loads(path.read_text())
    edit(raw)
    raw[DIGEST_FIELD] = manifest_digest(raw)  # what someone who knows the format can always do
    path.write_text(json.dumps(raw))


def test_without_a_key_an_edit_with_a_recomputed_digest_is_not_found(tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    cat = Catalog(tmp_path)
    v = cat.write_table("docs", _table("a"))
    _resign_sha256(_mpath(tmp_path, v), lambda m: m.__setitem__("parents", ["f" * 64]))
    assert cat.resolve("docs").manifest.parents == ["f" * 64]  # the documented limit of an unkeyed digest


def test_with_a_key_edits_and_stripped_signatures_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k" * 32)
    cat = Catalog(tmp_path)
    v = cat.write_table("docs", _table("a"))
    path = _mpath(tmp_path, v)
    assert HMAC_FIELD in json.loads(path.read_text())
    original = path.read_text()
    _resign_sha256(path, lambda m: m.__setitem__("parents", ["f" * 64]))
    with pytest.raises(ManifestError, match="manifest_hmac_sha256 does not match"):
        DatasetVersion(str(_vdir(tmp_path, v)))
    path.write_text(original)
    _resign_sha256(path, lambda m: (m.pop(HMAC_FIELD), m.pop("manifest_key_id")))
    with pytest.raises(ManifestError, match="not signed, but a manifest key is set"):
        DatasetVersion(str(_vdir(tmp_path, v)))
    monkeypatch.setenv(KEY_ENV, "z" * 32)
    path.write_text(original)
    with pytest.raises(ManifestError, match="signed with another key"):
        DatasetVersion(str(_vdir(tmp_path, v)))


def test_data_sign_signs_a_version_published_before_the_key_after_verifying_it(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(KEY_ENV, raising=False)
    cat = Catalog(tmp_path)
    v = cat.write_table("docs", _table("a"))
    monkeypatch.setenv(KEY_ENV, "k" * 32)
    with pytest.raises(ManifestError, match="not signed"):
        DatasetVersion(str(_vdir(tmp_path, v)))
    assert cidermill(["data", "--root", str(tmp_path), "sign", f"docs@{v.version_id[:8]}"]) == 0
    assert DatasetVersion(str(_vdir(tmp_path, v))).version_id == v.version_id
    shard = _vdir(tmp_path, v) / v.manifest.shards[0].path
    other = cat.write_table("docs", _table("b"))
    shard.write_bytes((_vdir(tmp_path, other) / other.manifest.shards[0].path).read_bytes())
    assert cidermill(["data", "--root", str(tmp_path), "sign", f"docs@{v.version_id[:8]}"]) == 1  # broken: not signed
    assert "not signing a broken version" in capsys.readouterr().err


# ---- configs ----------------------------------------------------------------------------------------
def test_duplicate_yaml_keys_are_an_error_naming_both_lines(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("name: docs\nstages:\n  - text_length_v1: {}\noutput: {root: r}\nstages:\n  - normalize_text_v1\n")
    with pytest.raises(ConfigError, match=r"p\.yaml: line 5 column 1: key 'stages' is given twice in one mapping "
                                          r"\(first at line 2\)"):
        read_yaml(path)
    path.write_text("executor: {workers: 1, workers: 2}\n")
    with pytest.raises(ConfigError, match="key 'workers' is given twice"):
        read_yaml(path)


def test_a_non_utf8_byte_in_a_yaml_file_is_one_line(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_bytes(b"name: docs\nnotes: caf\xe9\n")
    with pytest.raises(ConfigError, match=r"p\.yaml line 2 column 11: byte 0xe9 is not UTF-8; save the file as UTF-8"):
        read_yaml(path)


@pytest.mark.parametrize("value", ["inf", ".inf", "nan", "-3", "1e20", "10**30", "1e400"])
def test_counts_refuse_infinite_negative_and_absurd_values(value):
    parsed = parse_assignment(f"x={value}")[1]
    with pytest.raises(ConfigError, match="is not a count"):
        parse_count(parsed, key="token_budget", where="mixture")


@pytest.mark.parametrize("key, value, message", [
    ("executor.batch_rows", "1e20", "expected an integer"),
    ("executor.batch_rows", "100000000000000000000", "too large for an integer option"),
    ("executor.batch_rows", "20000000", "batch_rows must be between 1 and 16,777,216"),
    ("executor.workers", "99999999", "workers must be between 0"),
    ("executor.lock_wait_s", ".inf", "is not a finite number"),
    ("executor.connect_timeout_s", ".nan", "is not a finite number"),
    ("output.shard_target_bytes", "infGB", "is not a size"),
    ("output.row_group_rows", "0", "row_group_rows must be between 1"),
])
def test_pipeline_numbers_out_of_range_are_one_line_config_errors(tmp_path, key, value, message):
    from corpus.pipeline import load_pipeline

    cfg = {"name": "docs", "input": {"format": "jsonl", "paths": [str(tmp_path / "*.jsonl")]},
           "output": {"root": str(tmp_path / "root")}, "stages": []}
    with pytest.raises(ConfigError, match=message) as info:
        load_pipeline(cfg, overrides=[f"{key}={value}"])
    assert "\n" not in str(info.value)


def test_a_mixture_token_budget_of_inf_is_a_config_error():
    from manifests.mixture import MixtureFile

    with pytest.raises(ConfigError, match=r"token_budget in mix: inf is not a count"):
        build_config(MixtureFile, {"name": "m", "stage": "core", "tokenizer": "t", "seq_length": 8,
                                   "token_budget": float("inf"), "components": [{"name": "a", "dataset": "d"}]},
                     where="mix")


def test_an_over_long_name_fails_validation_not_the_lock():
    with pytest.raises(ConfigError, match="is 300 characters; at most 128"):
        validate_name("a" * 300)
    validate_name("a" * 128)


@pytest.mark.parametrize("uri", ["hdfs://namenode:8020/data", "ftp://host/x", "abfs://c@a.dfs.core.windows.net/x"])
def test_an_unsupported_storage_scheme_is_one_line(uri):
    with pytest.raises(ConfigError, match=r"storage scheme '\w+://' is not supported; use a local path") as info:
        Location.parse(uri)
    assert "\n" not in str(info.value)


def test_gcs_uris_get_a_retry_limit_so_an_unreachable_store_fails_fast():
    loc = Location.parse("gs://bucket/root")
    assert type(loc.fs).__name__ == "GcsFileSystem"
    assert Location.parse("gs://bucket/root?retry_limit_seconds=3").path == "bucket/root"


def test_count_fields_still_take_units():
    @__import__("dataclasses").dataclass(frozen=True, kw_only=True)
    class C:
        n: Count

    assert build_config(C, {"n": "6.3T"}, where="x").n == 6_300_000_000_000
    assert os.environ.get("NO_SUCH_VAR") is None


def test_reading_a_version_checks_rows_always_and_hashes_when_asked(tmp_path):
    cat = Catalog(tmp_path)
    a = cat.write_table("docs", _table("a"))
    b = cat.write_table("other", _table("b"))  # as many rows: a swap keeps the row count
    c = cat.write_table("short", _table("c", 1))
    shard_a = _vdir(tmp_path, a) / a.manifest.shards[0].path
    shard_a.write_bytes((_vdir(tmp_path, b) / b.manifest.shards[0].path).read_bytes())
    v = cat.resolve("docs")
    assert v.read().column("id").to_pylist() == ["b0", "b1", "b2"]  # what an unverified read sees
    with pytest.raises(ManifestError, match=r"part-00000-000\.parquet: sha256 .* does not match the manifest's"):
        v.read(verify=True)
    with pytest.raises(ManifestError, match="does not match the manifest's"):
        next(v.iter_batches(verify=True))
    shard_a.write_bytes((_vdir(tmp_path, c) / c.manifest.shards[0].path).read_bytes())
    with pytest.raises(ManifestError, match="1 rows, the manifest says 3"):
        v.read()
