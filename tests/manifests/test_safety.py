"""Data safety of the catalog: manifest digests, full verify, names, locks, atomic publish."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from manifests import Catalog, ConfigError, DatasetVersion, Manifest, ManifestError, version_id_of
from manifests.locks import Lock, LockBusy
from manifests.manifest import DIGEST_FIELD, MANIFEST_NAME, manifest_digest
from manifests.names import validate_name
from manifests.shards import ShardWriter
from manifests.storage import Location

from ..conftest import REPO


def _table(ids):
    return pa.table({"id": pa.array([str(i) for i in ids]), "text": pa.array([f"document {i}" for i in ids])})


def _manifest_path(root, v):
    return root / v.name / f"{v.version_id}.{MANIFEST_NAME}"


@pytest.mark.parametrize("edit", [
    lambda m: m["shards"][0].__setitem__("rows", 999),
    lambda m: m.__setitem__("name", "other"),
    lambda m: m.__setitem__("parents", ["f" * 64]),
    lambda m: m["shards"][0].__setitem__("tokens", 12345),
    lambda m: m["stats"].append({"name": "x", "rows_in": 1}),
    lambda m: m.__setitem__("created_at", "2001-01-01T00:00:00+00:00"),
])
def test_any_edit_of_a_published_manifest_is_found(tmp_path, edit):
    cat = Catalog(tmp_path)
    v = cat.write_table("docs", _table(range(3)))
    mpath = _manifest_path(tmp_path, v)
    raw = json.loads(mpath.read_text())
    edit(raw)
    mpath.write_text(json.dumps(raw))
    with pytest.raises(ManifestError, match="manifest_sha256 does not match"):
        DatasetVersion(str(tmp_path / v.name / v.version_id))
    with pytest.raises(ManifestError, match="manifest_sha256 does not match"):
        cat.resolve("docs")  # `show` and `verify` go through here
    assert cat.versions() == []  # `ls` does not report the edited version


def test_schema_version_1_manifests_without_digest_still_read_and_say_so(tmp_path):
    v = Catalog(tmp_path).write_table("docs", _table(range(3)))
    mpath = _manifest_path(tmp_path, v)
    raw = json.loads(mpath.read_text())
    raw.pop(DIGEST_FIELD)
    raw["schema_version"] = 1
    mpath.write_text(json.dumps(raw))
    old = DatasetVersion(str(tmp_path / v.name / v.version_id))
    assert old.unprotected and old.verify() == []
    assert not v.unprotected
    raw["schema_version"] = 2  # a v2 manifest must carry its digest
    mpath.write_text(json.dumps(raw))
    with pytest.raises(ManifestError, match="manifest_sha256"):
        DatasetVersion(str(tmp_path / v.name / v.version_id))


def _swap_shard(tmp_path, v, table: pa.Table) -> DatasetVersion:
    """Replace the shard with other Parquet bytes and re-sign the manifest around them, as a
    buggy writer (or someone who re-signs) would: hashes and digest agree, contents do not."""
    vdir = tmp_path / v.name / v.version_id
    shard = vdir / v.manifest.shards[0].path
    pq.write_table(table, shard)
    raw = json.loads(_manifest_path(tmp_path, v).read_text())
    import hashlib

    raw["shards"][0]["sha256"] = hashlib.sha256(shard.read_bytes()).hexdigest()
    raw["shards"][0]["bytes"] = shard.stat().st_size
    raw["version_id"] = version_id_of([raw["shards"][0]["sha256"]])
    raw[DIGEST_FIELD] = manifest_digest(raw)
    new_dir = tmp_path / v.name / raw["version_id"]
    vdir.rename(new_dir)
    _manifest_path(tmp_path, v).unlink()
    (tmp_path / v.name / f"{raw['version_id']}.{MANIFEST_NAME}").write_text(json.dumps(raw))
    return DatasetVersion(str(new_dir))


def test_verify_checks_each_shards_schema_against_the_manifest(tmp_path):
    v = Catalog(tmp_path).write_table("docs", _table(range(3)))
    bad = _swap_shard(tmp_path, v, pa.table({"id": pa.array(["0", "1", "2"]), "text": pa.array([1, 2, 3])}))
    [problem] = bad.verify()
    assert "column 'text' is int64, manifest says string" in problem.reason


def test_verify_checks_each_shards_row_count_against_the_manifest(tmp_path):
    v = Catalog(tmp_path).write_table("docs", _table(range(3)))
    bad = _swap_shard(tmp_path, v, _table(range(5)))
    [problem] = bad.verify()
    assert problem.reason == "rows 5 != manifest 3"


@pytest.mark.parametrize("name", ["my docs", "-rf", "a@b", "docs.rejects", ".hidden", "", "a/b", "é"])
def test_bad_dataset_names_are_refused(tmp_path, name):
    with pytest.raises(ConfigError):
        validate_name(name)
    if name != "docs.rejects":  # the engine (and synth) write `<name>.rejects` through the catalog
        with pytest.raises(ConfigError):
            Catalog(tmp_path).write_table(name, _table(range(1)))
        assert not (tmp_path / name).exists() or name in ("", ".hidden")


def test_good_names_pass_and_rejects_names_only_for_the_engine():
    for name in ["c4-clean", "web_v2.tok-bpe", "A.b_c-1"]:
        assert validate_name(name) == name
    assert validate_name("docs.rejects", allow_rejects=True) == "docs.rejects"
    with pytest.raises(ConfigError):
        validate_name("-x.rejects", allow_rejects=True)


# ---- locks -----------------------------------------------------------------------------------
def test_a_held_lock_says_who_holds_it(tmp_path):
    root = Location.parse(tmp_path)
    with Lock(root, "k", what="run docs"):
        with pytest.raises(LockBusy) as info:
            Lock(root, "k", what="run docs", wait_s=0).acquire()
    msg = str(info.value)
    assert f"pid {os.getpid()} on {socket.gethostname()}" in msg and "run docs is locked" in msg
    with Lock(root, "k", what="run docs", wait_s=0):  # released: free again
        pass


def test_the_lock_of_a_killed_process_is_taken_over(tmp_path):
    code = ("import sys, time; from manifests.locks import Lock; from manifests.storage import Location; "
            f"l = Lock(Location.parse({str(tmp_path)!r}), 'k', what='x'); l.acquire(); print('held', flush=True); "
            "time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout.readline().strip() == "held"
    root = Location.parse(tmp_path)
    with pytest.raises(LockBusy, match=f"pid {proc.pid}"):
        Lock(root, "k", what="x", wait_s=0).acquire()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    t0 = time.monotonic()
    with Lock(root, "k", what="x", wait_s=5):
        assert time.monotonic() - t0 < 1
        assert json.loads((tmp_path / ".locks" / "k.lock").read_text())["pid"] == os.getpid()


# ---- atomic publish --------------------------------------------------------------------------
def _stage(cat: Catalog, name: str, run_key: str, ids, prefix: str, rel: str):
    staging = cat.staging_dir(name.removesuffix(".rejects"), run_key)
    w = ShardWriter(staging.join(rel), prefix, relative_dir=rel)
    w.write(_table(ids))
    shards = w.close()
    return staging, Manifest(name=name, version_id=version_id_of([s.sha256 for s in shards]), shards=shards,
                             schema=_table([0]).schema)


def _tmp_files(root):
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if ".tmp-" in f]


def test_a_failed_publish_shows_neither_the_version_nor_its_rejects_and_a_retry_publishes_both(tmp_path, monkeypatch):
    cat = Catalog(tmp_path)
    staging, main = _stage(cat, "docs", "k", range(10), "part-00000", "shards")
    _, rejects = _stage(cat, "docs.rejects", "k", range(10, 13), "p0-part-00000", "rejects")
    rejects.name = "docs.rejects"
    real = Location.write_bytes_atomic

    def full_disk_on_main_manifest(self, data):
        if self.path.endswith(f"/{main.version_id}.{MANIFEST_NAME}"):
            with open(self.path + ".tmp-x", "wb"):
                pass  # a partial temp file, then the disk is full
            os.unlink(self.path + ".tmp-x")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Location, "write_bytes_atomic", full_disk_on_main_manifest)
    with pytest.raises(OSError, match="No space left"):
        cat.publish(staging, main, rejects=rejects, cleanup=False)
    assert cat.versions() == []  # the rejects' manifest is written, but not listed without its version
    with pytest.raises(ManifestError):
        cat.resolve("docs.rejects")
    assert not (tmp_path / "docs" / main.version_id).exists()  # shards went back to staging
    assert (tmp_path / ".staging" / "docs-k" / "shards" / "part-00000-000.parquet").exists()
    assert _tmp_files(tmp_path) == []
    monkeypatch.setattr(Location, "write_bytes_atomic", real)
    cat.publish(staging, main, rejects=rejects)
    assert sorted(e.name for e in cat.versions()) == ["docs", "docs.rejects"]
    assert cat.resolve("docs.rejects").manifest.extra["rejects_of"] == f"docs@{main.version_id}"
    assert cat.resolve("docs").manifest.extra["rejects_version"] == rejects.version_id


def test_a_full_disk_while_updating_latest_still_resolves_the_new_version(tmp_path, monkeypatch):
    cat = Catalog(tmp_path)
    cat.write_table("docs", _table(range(3)))
    real = Location.write_bytes_atomic

    def full_disk_on_latest(self, data):
        if self.path.endswith("/LATEST"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Location, "write_bytes_atomic", full_disk_on_latest)
    time.sleep(0.01)
    new = cat.write_table("docs", _table(range(4)))  # published: no error for the caller
    assert cat.resolve("docs").version_id == new.version_id


def test_atomic_writes_leave_no_temp_file_when_the_disk_is_full(tmp_path, monkeypatch):
    loc = Location.parse(tmp_path / "x.json")

    def no_space(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError):
        loc.write_bytes_atomic(b"{}")
    assert os.listdir(tmp_path) == []
