"""Object-store roots end to end (issue 22): inputs, staging, shards, markers, manifests, LATEST and
locks all on `s3://`, against a local S3 server (moto), with the same ids as a local-disk run."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.fs as pafs
import pytest
import yaml

from corpus.executors import run_pipeline
from corpus.pipeline import load_pipeline
from manifests import Catalog
from manifests.locks import Lock, LockBusy
from manifests.storage import Location

from ..conftest import REPO, write_jsonl
from ..corpus import slow_stage  # noqa: F401  (registers test_sleep_v1)


def test_multipart_upload_round_trips(s3_server):
    """pyarrow's S3 output stream switches to a multipart upload past its part size (shards are 256 MiB
    by default, so every real shard takes this path); the server must put the parts back together."""
    bucket = s3_server.bucket()
    fs = s3_server.fs()
    data = hashlib.sha256(b"x").digest() * (13 * 2**20 // 32)  # 13 MiB: two parts of pyarrow's 10 MiB
    with fs.open_output_stream(f"{bucket}/big.bin") as out:
        for i in range(0, len(data), 2**20):
            out.write(data[i:i + 2**20])
    loc = Location.parse(s3_server.uri(bucket, "big.bin"))
    assert loc.sha256() == (hashlib.sha256(data).hexdigest(), len(data))
    assert f"POST /{bucket}/big.bin?uploads" in Path(s3_server.log).read_text()


def test_lock_object_admits_one_holder_at_a_time(s3_server):
    root = Location.parse(s3_server.uri(s3_server.bucket(), "root"))
    with Lock(root, "run-x", what="run x"):
        with pytest.raises(LockBusy, match=r"run x is locked by pid \d+ on .*lock file s3://"):
            Lock(root, "run-x", what="run x", wait_s=0).acquire()
    counter = root.join("counter")
    counter.write_bytes_atomic(b"0")

    def bump():  # read-modify-write: only correct if the lock excludes the others
        for _ in range(3):
            with Lock(root, "count", what="counter", poll_s=0.05):
                value = int(counter.read_bytes())
                time.sleep(0.01)
                counter.write_bytes_atomic(str(value + 1).encode())

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert int(counter.read_bytes()) == 12
    assert root.join(".locks", "count.lock").file_sizes() == {}  # every ticket released


def _c4_inputs(tmp_path: Path, docs: list[dict], n_files: int) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    per = len(docs) // n_files
    for i in range(n_files):
        write_jsonl(folder / f"part-{i:02d}.jsonl.gz", docs[i * per:(i + 1) * per], compress="gz")
    return folder


def _c4_pipeline(paths: str, root: str) -> dict:
    return {
        "name": "docs",
        "input": {"format": "jsonl", "paths": [paths]},
        "output": {"root": root, "row_group_rows": 64},
        "executor": {"kind": "local", "workers": 2, "batch_rows": 50},
        "stages": [{"test_sleep_v1": {"seconds_per_batch": 0.3}}, {"normalize_text_v1": {}},
                   {"text_length_v1": {"min_chars": 200, "min_words": 50}}],
    }


def _cli(config: Path) -> list[str]:
    code = ("import sys, tests.corpus.slow_stage; from manifests.main import main; "
            f"sys.exit(main(['corpus', 'run', {str(config)!r}, '--no-progress']))")
    return [sys.executable, "-c", code]


@pytest.mark.slow
def test_s3_run_killed_and_resumed_gives_the_local_ids(tmp_path, c4_docs, s3_server):
    folder = _c4_inputs(tmp_path, c4_docs, 6)
    local = run_pipeline(load_pipeline(_c4_pipeline(str(folder / "*.jsonl.gz"), str(tmp_path / "local"))),
                         progress=False)

    bucket = s3_server.bucket()
    s3_server.upload(folder, bucket, "in")
    root_uri = s3_server.uri(bucket, "root")
    cfg = _c4_pipeline(s3_server.uri(bucket, "in/*.jsonl.gz"), root_uri)
    config = tmp_path / "p.yaml"
    config.write_text(yaml.safe_dump(cfg))
    fs = s3_server.fs()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(_cli(config), cwd=REPO, env=env, start_new_session=True)

    def markers() -> list[str]:
        infos = fs.get_file_info(pafs.FileSelector(f"{bucket}/root/.staging", recursive=True, allow_not_found=True))
        return [i.path for i in infos if "/pass-0/tasks/" in i.path and i.path.endswith(".json")]

    deadline = time.time() + 120
    while len(markers()) < 2 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert proc.poll() is None, f"the run ended before the kill (exit {proc.returncode})"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(markers())
    assert 2 <= done_before < 6, "the kill must land mid-run"
    assert Catalog(root_uri).versions() == []  # nothing published by the killed run

    resumed = subprocess.run(_cli(config), cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"{6 - done_before} run, {done_before} resumed" in resumed.stdout
    # the killed run's lock ticket stopped beating: the rerun took it over instead of waiting for ever
    assert "taken over if its heartbeat stops for 30 s" in resumed.stderr
    assert "stopped its heartbeat" in resumed.stderr

    catalog = Catalog(root_uri)
    version = catalog.resolve("docs")
    assert version.version_id == local.version.version_id
    assert version.read(columns=["id"]).column("id").to_pylist() == \
        local.version.read(columns=["id"]).column("id").to_pylist()
    assert catalog.resolve("docs.rejects").version_id == local.rejects.version_id
    assert version.verify() == []
    latest = fs.open_input_stream(f"{bucket}/root/docs/LATEST").read().decode()
    assert latest == local.version.version_id
    leftovers = fs.get_file_info(pafs.FileSelector(f"{bucket}/root/.staging", recursive=True, allow_not_found=True))
    assert [i.path for i in leftovers if i.type == pafs.FileType.File] == []
    assert fs.get_file_info(pafs.FileSelector(f"{bucket}/root/.locks", recursive=True, allow_not_found=True)) == [] \
        or all(i.type == pafs.FileType.Directory for i in
               fs.get_file_info(pafs.FileSelector(f"{bucket}/root/.locks", recursive=True)))


@pytest.mark.slow
def test_global_stages_on_s3_give_the_local_ids(tmp_path, c4_docs, s3_server):
    """URL, exact and MinHash dedup and decontamination with an `s3://` root and inputs."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):  # part-2 repeats part-0's first 20 docs: exact (and near) duplicates across files
        docs = c4_docs[i * 60:(i + 1) * 60] + (c4_docs[:20] if i == 2 else [])
        write_jsonl(folder / f"part-{i}.jsonl.gz", docs, compress="gz")

    def config(paths: str, root: str) -> dict:
        return {"name": "glob", "input": {"format": "jsonl", "paths": [paths]},
                "output": {"root": root, "row_group_rows": 64},
                "executor": {"kind": "local", "workers": 2, "batch_rows": 50},
                "stages": [{"url_dedup_v1": {"field": "source"}}, {"exact_dedup_v1": {"field": "text"}},
                           {"minhash_dedup_v1": {"ngram": 5, "bands": 16, "rows": 7, "min_similarity": 0.7}},
                           {"decontaminate_v1": {"min_n": 8, "max_n": 13, "common_threshold": 1000}}]}

    local = run_pipeline(load_pipeline(config(str(folder / "*.jsonl.gz"), str(tmp_path / "local"))), progress=False)
    assert local.version.manifest.rows < 200  # the duplicates went
    bucket = s3_server.bucket()
    s3_server.upload(folder, bucket, "in")
    remote = run_pipeline(load_pipeline(config(s3_server.uri(bucket, "in/*.jsonl.gz"), s3_server.uri(bucket, "root"))),
                          progress=False)
    assert remote.version.version_id == local.version.version_id
    assert remote.rejects.version_id == local.rejects.version_id
    assert not (tmp_path / "root").exists()


def test_object_store_roots_that_cannot_work_fail_in_one_line_before_any_work(tmp_path, c4_docs, s3_server):
    from manifests.errors import ConfigError

    folder = _c4_inputs(tmp_path, c4_docs[:20], 1)
    missing = _c4_pipeline(str(folder / "*.jsonl.gz"), s3_server.uri("no-such-bucket", "root"))
    with pytest.raises(ConfigError, match=r"bucket 'no-such-bucket' does not exist; create it first$"):
        run_pipeline(load_pipeline(missing), progress=False)
    dead = _c4_pipeline(str(folder / "*.jsonl.gz"), "s3://b/root?endpoint_override=127.0.0.1:1&scheme=http")
    with pytest.raises(ConfigError, match=r"the object store does not answer \(.*Could not connect.*\); check the "
                                          r"credentials") as err:
        run_pipeline(load_pipeline(dead), progress=False)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"not a storage URI pyarrow.fs can open"):
        Location.parse("s3://b/root?no_such_option=1")


def test_glob_through_the_filesystem_matches_any_component(s3_server):
    bucket = s3_server.bucket()
    fs = s3_server.fs()
    for key in ("crawl/a/x.warc.gz", "crawl/b/y.warc.gz", "crawl/b/deep/z.warc.gz", "crawl/b/y.txt"):
        with fs.open_output_stream(f"{bucket}/{key}") as out:
            out.write(b"1")
    names = lambda uri: [loc.path.split("/", 1)[1] for loc in Location.parse(s3_server.uri(bucket, uri)).glob()]  # noqa: E731
    assert names("crawl/*/*.warc.gz") == ["crawl/a/x.warc.gz", "crawl/b/y.warc.gz"]
    assert names("crawl/**/*.warc.gz") == ["crawl/a/x.warc.gz", "crawl/b/deep/z.warc.gz", "crawl/b/y.warc.gz"]
    assert names("crawl/b/y.txt") == ["crawl/b/y.txt"]
    assert names("crawl/c/*.gz") == []
