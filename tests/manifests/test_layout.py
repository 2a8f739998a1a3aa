"""The catalog layout: a version folder holds its data only, its manifest lies beside it; catalogs of the
older layout (`<id>/manifest.json`) are still read, published into and migrated."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from manifests import Catalog, DatasetVersion, ManifestError
from manifests.cli import main as data_main
from manifests.manifest import MANIFEST_NAME


def _table(n: int = 50, tag: str = "row number") -> pa.Table:
    return pa.table({"id": [f"r{i}" for i in range(n)], "text": [f"{tag} {i}" for i in range(n)]})


def _files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _to_older_layout(root: Path) -> list[Path]:
    """Put every manifest where cidermill wrote it before it moved out: `<id>/manifest.json`. The bytes are
    the same (a manifest does not say where it lies), so this is the catalog an older cidermill left."""
    moved = []
    for mpath in sorted(root.glob(f"*/*.{MANIFEST_NAME}")):
        vdir = mpath.parent / mpath.name.removesuffix(f".{MANIFEST_NAME}")
        vdir.mkdir(exist_ok=True)
        mpath.rename(vdir / MANIFEST_NAME)
        moved.append(vdir / MANIFEST_NAME)
    return moved


def test_the_version_folder_holds_parquet_only_and_the_manifest_lies_beside_it(tmp_path):
    cat = Catalog(tmp_path)
    v = cat.write_table("t", _table())
    # the id of the same rows as the previous layout published them (computed with cidermill before the
    # move, on this table): the manifest moved, its content and the content address did not
    assert v.version_id == "b9cd70ecd171dca16e8996a7c433dfdd30a8e5e32fc71d544752251ce5b88dc0"
    assert sorted(os.listdir(tmp_path / "t")) == ["LATEST", v.version_id, f"{v.version_id}.manifest.json"]
    assert _files_under(tmp_path / "t" / v.version_id) == ["shards/part-00000-000.parquet"]
    assert v.manifest_loc.path == str(tmp_path / "t" / f"{v.version_id}.manifest.json")
    assert v.data_folder.path == str(tmp_path / "t" / v.version_id)
    assert not v.legacy_layout
    assert ds.dataset(v.directory.path).to_table().sort_by("id").equals(_table().sort_by("id"))


def test_a_manifest_copied_under_another_id_is_refused(tmp_path):
    cat = Catalog(tmp_path)
    a = cat.write_table("t", _table(3, "a"))
    b = cat.write_table("t", _table(3, "b"))
    (tmp_path / "t" / f"{a.version_id}.{MANIFEST_NAME}").write_bytes(
        (tmp_path / "t" / f"{b.version_id}.{MANIFEST_NAME}").read_bytes())
    skipped = []
    assert [e.version_id for e in cat.versions("t", skipped=skipped)] == [b.version_id]
    assert "lies in t/" + a.version_id[:12] in skipped[0].reason


def test_a_killed_publish_leaves_a_folder_without_manifest_that_the_next_publish_removes(tmp_path):
    cat = Catalog(tmp_path)
    kept = cat.write_table("t", _table(3, "kept"))
    orphan = tmp_path / "t" / ("a" * 64)
    (orphan / "shards").mkdir(parents=True)
    (orphan / "shards" / "part-00000-000.parquet").write_bytes(b"moved, then killed before the manifest")
    (tmp_path / "t" / f"{'a' * 64}.{MANIFEST_NAME}.tmp-4242-cafebabe").write_text("{")
    assert [e.version_id for e in cat.versions("t")] == [kept.version_id]  # not a version
    with pytest.raises(ManifestError, match="no manifest"):
        DatasetVersion(str(orphan))
    new = cat.write_table("t", _table(3, "new"))
    assert sorted(os.listdir(tmp_path / "t")) == sorted(
        ["LATEST", kept.version_id, f"{kept.version_id}.{MANIFEST_NAME}", new.version_id,
         f"{new.version_id}.{MANIFEST_NAME}"])


def test_an_older_catalog_is_read_published_into_signed_and_migrated(tmp_path, capsys, monkeypatch):
    cat = Catalog(tmp_path)
    old = cat.write_table("t", _table())
    rejects = cat.write_table("t.rejects", _table(2, "gone"), extra={"kind": "rejects"})
    before = {p: p.read_bytes() for p in tmp_path.glob(f"*/*.{MANIFEST_NAME}")}
    legacy = _to_older_layout(tmp_path)
    assert len(legacy) == 2 and not list(tmp_path.glob(f"*/*.{MANIFEST_NAME}"))

    # read: listed, resolved (by name through LATEST, and by id), verified; the hint names the shards' folder
    assert [(e.name, e.version_id) for e in cat.versions()] == [("t", old.version_id),
                                                                 ("t.rejects", rejects.version_id)]
    v = cat.resolve("t")
    assert v.legacy_layout and v.verify() == []
    assert v.data_folder.path == str(tmp_path / "t" / old.version_id / "shards")
    assert cat.resolve(old.version_id[:10]).version_id == old.version_id
    assert data_main(["data", "--root", str(tmp_path), "show", "t"]) == 0
    out = capsys.readouterr().out
    assert f"data:      {tmp_path / 't' / old.version_id / 'shards'}\n" in out
    legacy_mloc = tmp_path / "t" / old.version_id / MANIFEST_NAME
    assert f"manifest:  {legacy_mloc}  (older layout: cidermill data migrate)" in out

    # a publish next to older versions keeps them (cleanup recognises a manifest inside the folder)
    new = cat.write_table("t", _table(5, "new"))
    assert [e.version_id for e in cat.versions("t")] == [old.version_id, new.version_id]
    assert (tmp_path / "t" / old.version_id / MANIFEST_NAME).exists()
    assert cat.write_table("t", _table()).version_id == old.version_id  # same content: the older one, as is
    assert not (tmp_path / "t" / f"{old.version_id}.{MANIFEST_NAME}").exists()

    # migrate: a dry run moves nothing; then each manifest moves out byte for byte
    assert data_main(["data", "--root", str(tmp_path), "migrate", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"would move: t@{old.version_id[:12]}" in out and f"would move: t.rejects@{rejects.version_id[:12]}" in out
    assert all(p.exists() for p in legacy)
    assert data_main(["data", "--root", str(tmp_path), "migrate"]) == 0
    assert "2 manifest(s) moved" in capsys.readouterr().out
    assert len(before) == 2 and {p: p.read_bytes() for p in before if p.exists()} == before
    assert not any(p.exists() for p in legacy)
    assert _files_under(tmp_path / "t" / old.version_id) == ["shards/part-00000-000.parquet"]
    assert [e.version_id for e in cat.versions("t")] == [old.version_id, new.version_id]
    assert cat.resolve("t.rejects").manifest.extra["kind"] == "rejects"
    assert cat.migrate_layout() == []  # nothing left to move

    # signing a version of the older layout writes the signed manifest beside the folder
    _to_older_layout(tmp_path)
    monkeypatch.setenv("CIDERMILL_MANIFEST_KEY", "k" * 32)
    signed = cat.sign(f"t@{new.version_id[:12]}")
    assert signed.manifest_loc.path == str(tmp_path / "t" / f"{new.version_id}.{MANIFEST_NAME}")
    assert not (tmp_path / "t" / new.version_id / MANIFEST_NAME).exists()
    assert "manifest_hmac_sha256" in json.loads(Path(signed.manifest_loc.path).read_text())


def test_an_artifact_keeps_its_files_in_the_folder_and_its_manifest_beside_it(tmp_path):
    import hashlib

    from manifests import Manifest, ShardInfo, version_id_of

    cat = Catalog(tmp_path)
    staging = cat.staging_dir("tok", "k")
    payload = b"\x00\x01 not parquet"
    staging.join("tokens.bin").write_bytes_atomic(payload)
    sha = hashlib.sha256(payload).hexdigest()
    manifest = Manifest(name="tok", version_id=version_id_of([sha]), schema=pa.schema([]), extra={"kind": "tokens"},
                        shards=[ShardInfo(path="tokens.bin", rows=1, bytes=len(payload), sha256=sha)])
    v = cat.publish(staging, manifest)
    assert _files_under(tmp_path / "tok" / v.version_id) == ["tokens.bin"]
    assert (tmp_path / "tok" / f"{v.version_id}.{MANIFEST_NAME}").exists()
    assert v.data_folder is None and v.verify() == []
