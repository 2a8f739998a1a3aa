"""The dataset contract: manifests, content-addressed ids, verify, diff, refusals."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from manifests import Catalog, DatasetVersion, ManifestError, PipelineInfo, StageStats, version_id_of
from manifests.manifest import DIGEST_FIELD, MANIFEST_NAME, manifest_digest


def _resign(mpath, raw):
    """Write an edited manifest with a recomputed digest: the digest is no secret, so the checks
    behind it (ids, paths) must hold on their own against someone who re-signs."""
    raw[DIGEST_FIELD] = manifest_digest(raw)
    mpath.write_text(json.dumps(raw))


def _table(ids, texts=None):
    texts = texts or [f"document {i}" for i in ids]
    return pa.table({"id": pa.array([str(i) for i in ids]), "source": pa.array([f"src#{i}" for i in ids]),
                     "text": pa.array(texts)})


def test_manifest_holds_the_contract(tmp_path):
    cat = Catalog(tmp_path)
    stats = [StageStats("text_length_v1", rows_in=5, rows_out=3, dropped={"too_short": 2}, seconds=0.5)]
    info = PipelineInfo(name="p", stages=[{"name": "text_length_v1", "config": {"min_chars": 3}}],
                        config={"k": 1}, code_revision="abc")
    v = cat.write_table("docs", _table(range(3)), pipeline=info, parents=["p0"], stats=stats)

    raw = json.loads((tmp_path / "docs" / f"{v.version_id}.{MANIFEST_NAME}").read_text())
    assert raw["schema_version"] == 2
    assert raw[DIGEST_FIELD] == manifest_digest(raw)
    assert raw["name"] == "docs"
    assert raw["parents"] == ["p0"]
    assert raw["rows"] == 3
    [shard] = raw["shards"]
    assert shard["path"] == "shards/part-00000-000.parquet"
    assert shard["rows"] == 3
    assert shard["bytes"] == (tmp_path / "docs" / v.version_id / shard["path"]).stat().st_size
    assert raw["version_id"] == version_id_of([shard["sha256"]])
    assert raw["pipeline"]["stages"] == [{"name": "text_length_v1", "config": {"min_chars": 3}}]
    assert raw["pipeline"]["code_revision"] == "abc"
    assert raw["stats"][0]["dropped"] == {"too_short": 2}
    assert [f["name"] for f in raw["schema"]["fields"]] == ["id", "source", "text"]
    assert pq.ParquetFile(tmp_path / "docs" / v.version_id / shard["path"]).metadata.row_group(0).column(0).compression == "ZSTD"


def test_same_content_same_id_and_publish_is_idempotent(tmp_path):
    cat = Catalog(tmp_path)
    a = cat.write_table("docs", _table(range(10)))
    b = cat.write_table("docs", _table(range(10)))
    c = cat.write_table("docs", _table(range(11)))
    assert a.version_id == b.version_id != c.version_id
    assert len(cat.versions("docs")) == 2
    assert not list((tmp_path / ".staging").iterdir())  # nothing left half-written


def test_verify_names_the_shard_with_a_flipped_byte(tmp_path):
    cat = Catalog(tmp_path)
    v = cat.write_table("docs", [_table(range(0, 5000)), _table(range(5000, 10000))], target_bytes=20_000)
    assert len(v.manifest.shards) >= 2
    assert v.verify() == []
    victim = v.manifest.shards[1]
    path = tmp_path / "docs" / v.version_id / victim.path
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    problems = DatasetVersion(str(tmp_path / "docs" / v.version_id)).verify()
    assert [p.path for p in problems] == [victim.path]
    assert "sha256" in problems[0].reason


def test_tampered_manifest_hash_is_refused(tmp_path):
    v = Catalog(tmp_path).write_table("docs", _table(range(3)))
    mpath = tmp_path / "docs" / f"{v.version_id}.{MANIFEST_NAME}"
    raw = json.loads(mpath.read_text())
    raw["shards"][0]["sha256"] = "0" * 64
    _resign(mpath, raw)
    with pytest.raises(ManifestError, match="does not match its shard hashes"):
        DatasetVersion(str(tmp_path / "docs" / v.version_id))


@pytest.mark.parametrize("bad_path", ["../../etc/passwd", "/etc/passwd", "shards/../../x.parquet"])
def test_paths_escaping_the_version_are_refused(tmp_path, bad_path):
    v = Catalog(tmp_path).write_table("docs", _table(range(3)))
    mpath = tmp_path / "docs" / f"{v.version_id}.{MANIFEST_NAME}"
    raw = json.loads(mpath.read_text())
    raw["shards"][0]["path"] = bad_path
    _resign(mpath, raw)
    with pytest.raises(ManifestError, match="escapes the version directory|must be relative"):
        DatasetVersion(str(tmp_path / "docs" / v.version_id))


def test_unknown_schema_version_is_refused(tmp_path):
    v = Catalog(tmp_path).write_table("docs", _table(range(3)))
    mpath = tmp_path / "docs" / f"{v.version_id}.{MANIFEST_NAME}"
    raw = json.loads(mpath.read_text())
    raw["schema_version"] = 99
    mpath.write_text(json.dumps(raw))
    with pytest.raises(ManifestError, match="unknown schema_version 99"):
        DatasetVersion(str(tmp_path / "docs" / v.version_id))


def test_a_directory_without_manifest_is_not_a_version(tmp_path):
    v = Catalog(tmp_path).write_table("docs", _table(range(3)))
    (tmp_path / "docs" / f"{v.version_id}.{MANIFEST_NAME}").unlink()
    assert Catalog(tmp_path).versions() == []
    with pytest.raises(ManifestError, match="no manifest"):
        DatasetVersion(str(tmp_path / "docs" / v.version_id))


def test_diff_reports_exact_ids_and_stat_deltas(tmp_path):
    from manifests import diff_versions

    cat = Catalog(tmp_path)
    a = cat.write_table("docs", _table([1, 2, 3, 4]), stats=[StageStats("f", 4, 4)])
    b = cat.write_table("docs", _table([2, 3, 4, 5, 6]), stats=[StageStats("f", 6, 5, dropped={"too_short": 1})])
    d = diff_versions(a, b)
    assert d.added_ids == ["5", "6"]
    assert d.removed_ids == ["1"]
    assert d.stats_delta == [{"stage": "f", "rows_out": 1, "dropped": {"too_short": 1}}]


def test_resolve_by_name_prefix_and_ambiguity(tmp_path):
    cat = Catalog(tmp_path)
    a = cat.write_table("docs", _table(range(3)))
    assert cat.resolve("docs").version_id == a.version_id
    assert cat.resolve(f"docs@{a.version_id[:8]}").version_id == a.version_id
    assert cat.resolve(a.version_id[:10]).version_id == a.version_id
    with pytest.raises(ManifestError, match="no dataset version matches"):
        cat.resolve("nope")


def test_name_resolves_to_the_version_published_last(tmp_path):
    cat = Catalog(tmp_path)
    a = cat.write_table("docs", _table(range(3)))
    b = cat.write_table("docs", _table(range(4)))
    assert cat.resolve("docs").version_id == b.version_id
    again = cat.write_table("docs", _table(range(3)))  # same content as a: same id, no new directory
    assert again.version_id == a.version_id
    assert cat.resolve("docs").version_id == a.version_id
    assert len(cat.versions("docs")) == 2


def test_uri_and_local_path_work_alike(tmp_path):
    by_uri = Catalog(f"file://{tmp_path}/uri")
    by_path = Catalog(str(tmp_path / "path"))
    a = by_uri.write_table("docs", _table(range(7)))
    b = by_path.write_table("docs", _table(range(7)))
    assert a.version_id == b.version_id
    assert Catalog(f"file://{tmp_path}/uri").resolve("docs").read().column("id").to_pylist() == \
        [str(i) for i in range(7)]
    assert a.verify() == []


def test_cli_verify_and_diff(tmp_path, capsys):
    from manifests.main import main

    cat = Catalog(tmp_path)
    a = cat.write_table("docs", _table([1, 2]))
    b = cat.write_table("docs", _table([2, 3]))
    assert main(["data", "--root", str(tmp_path), "verify", "docs"]) == 0
    assert main(["data", "--root", str(tmp_path), "diff", a.version_id[:12], b.version_id[:12]]) == 0
    out = capsys.readouterr().out
    assert "+ 3" in out and "- 1" in out
    shard = tmp_path / "docs" / b.version_id / b.manifest.shards[0].path
    shard.write_bytes(shard.read_bytes()[:-1] + b"X")
    assert main(["data", "--root", str(tmp_path), "verify", f"docs@{b.version_id[:12]}"]) == 1
    assert b.manifest.shards[0].path in capsys.readouterr().err


def test_a_shard_target_below_one_row_group_still_splits_shards(tmp_path):
    """4,096-row groups of ~300-byte random rows are ~1.2 MB in memory; a 64 KiB target must still give
    shards near 64 KiB (it rolls over between row groups, so row groups are sized from the target)."""
    import random

    r = random.Random(0)
    words = ["".join(r.choice("abcdefghij") for _ in range(6)) for _ in range(3000 * 50)]
    t = pa.table({"id": [f"r{i}" for i in range(3000)],
                  "text": [" ".join(words[i * 50:(i + 1) * 50]) for i in range(3000)]})
    target = 64 << 10
    v = Catalog(tmp_path).write_table("t", t, target_bytes=target)
    sizes = [s.bytes for s in v.manifest.shards]
    assert len(sizes) > 5 and all(b <= 2 * target for b in sizes), sizes
    assert sum(s.rows for s in v.manifest.shards) == 3000
    assert v.read().column("id").to_pylist() == t.column("id").to_pylist()
