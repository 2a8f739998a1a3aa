"""Executors: manifests, determinism, shard failures, resume after SIGKILL, local == Ray."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from corpus.executors import run_pipeline
from corpus.pipeline import describe_plan, load_pipeline
from manifests import Catalog

from ..conftest import REPO, write_jsonl
from . import slow_stage  # noqa: F401  (registers test_sleep_v1)


def _inputs(tmp_path: Path, docs: list[dict], n_files: int, *, repeat: int = 1) -> Path:
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    per = len(docs) // n_files
    for i in range(n_files):
        write_jsonl(folder / f"part-{i:02d}.jsonl.gz", docs[i * per:(i + 1) * per] * repeat, compress="gz")
    return folder


def _pipeline(tmp_path: Path, folder: Path, root: Path, **executor) -> dict:
    return {
        "name": "docs",
        "input": {"format": "jsonl", "paths": [str(folder / "*.jsonl*")]},
        "output": {"root": str(root), "row_group_rows": 64},
        "executor": {"kind": "local", "workers": 2, "batch_rows": 50, **executor},
        "stages": [
            {"normalize_text_v1": {}},
            {"text_length_v1": {"min_chars": 200, "min_words": 50}},
            {"exact_dedup_v1": {}},
        ],
    }


def test_run_writes_a_version_with_stats_and_rejects(tmp_path, c4_docs):
    folder = _inputs(tmp_path, c4_docs, 3)
    out = run_pipeline(load_pipeline(_pipeline(tmp_path, folder, tmp_path / "root")), progress=False)
    m = out.version.manifest
    stats = {s.name: s for s in m.stats}
    assert list(stats) == ["read", "normalize_text_v1", "text_length_v1", "exact_dedup_v1"]
    assert stats["read"].rows_out == 300
    assert stats["text_length_v1"].dropped == {"too_few_words": 14, "too_short": 13}
    assert stats["exact_dedup_v1"].rows_out == m.rows == 273
    assert [s.path for s in m.shards] == [f"shards/part-{i:05d}-000.parquet" for i in range(3)]
    assert m.pipeline.stages[1] == {"name": "text_length_v1", "config": {
        "min_chars": 200, "max_chars": None, "min_words": 50, "max_words": None}}
    rejects = out.rejects.read()
    assert rejects.num_rows == 27
    assert sorted(set(rejects.column("drop_reason").to_pylist())) == ["too_few_words", "too_short"]
    assert out.version.verify() == []
    assert not any((tmp_path / "root" / ".staging").iterdir())


def test_output_is_deterministic_across_workers_and_batch_sizes(tmp_path, c4_docs):
    folder = _inputs(tmp_path, c4_docs, 4)
    a = run_pipeline(load_pipeline(_pipeline(tmp_path, folder, tmp_path / "a", workers=1, batch_rows=7)), progress=False)
    b = run_pipeline(load_pipeline(_pipeline(tmp_path, folder, tmp_path / "b", workers=2, batch_rows=300)), progress=False)
    assert a.version.version_id == b.version.version_id


def test_exact_dedup_is_global_and_keeps_the_first(tmp_path, c4_docs):
    folder = _inputs(tmp_path, c4_docs[:40], 2)
    (folder / "part-02.jsonl").write_text((folder / "part-00.jsonl.gz").name and "")
    write_jsonl(folder / "part-02.jsonl", [{"text": c4_docs[0]["text"].upper()}, {"text": c4_docs[25]["text"]}])
    out = run_pipeline(load_pipeline(_pipeline(tmp_path, folder, tmp_path / "root")), progress=False)
    dedup = {s.name: s for s in out.stats}["exact_dedup_v1"]
    assert dedup.dropped == {"duplicate": 2}
    rejects = out.rejects.read().to_pylist()
    dups = [r for r in rejects if r["drop_reason"] == "duplicate"]
    assert {r["source"] for r in dups} == {"part-02.jsonl#L1", "part-02.jsonl#L2"}  # later copies go


def test_a_broken_input_is_recorded_and_the_run_goes_on(tmp_path, c4_docs):
    folder = _inputs(tmp_path, c4_docs, 3)
    broken = folder / "part-01.jsonl.gz"
    broken.write_bytes(broken.read_bytes()[:-3000])
    out = run_pipeline(load_pipeline(_pipeline(tmp_path, folder, tmp_path / "root")), progress=False)
    [err] = [e for e in out.version.manifest.errors if e["kind"] == "shard"]
    assert err["input"] == "part-01.jsonl.gz" and "truncated" in err["reason"]
    assert 0 < err["records_read"] < 100
    assert {s.name: s for s in out.stats}["read"].rows_out == 200 + err["records_read"]


def test_dry_run_plan_writes_nothing(tmp_path, c4_docs):
    folder = _inputs(tmp_path, c4_docs, 2)
    p = load_pipeline(_pipeline(tmp_path, folder, tmp_path / "root"))
    plan = describe_plan(p)
    assert "2 input files" in plan and "pass 1:" in plan and "exact_dedup_v1 [global]" in plan
    assert not (tmp_path / "root").exists()


def _cli(config: Path, root: Path) -> list[str]:
    code = ("import sys, tests.corpus.slow_stage; from manifests.main import main; "
            f"sys.exit(main(['corpus', 'run', {str(config)!r}, '--no-progress']))")
    return [sys.executable, "-c", code]


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_gives_the_same_version(tmp_path, c4_docs):
    folder = _inputs(tmp_path, c4_docs, 6)
    cfg = _pipeline(tmp_path, folder, tmp_path / "killed")
    cfg["stages"].insert(0, {"test_sleep_v1": {"seconds_per_batch": 0.3}})
    config = tmp_path / "p.yaml"
    config.write_text(yaml.safe_dump(cfg))
    proc = subprocess.Popen(_cli(config, tmp_path / "killed"), cwd=REPO, start_new_session=True)
    staging = tmp_path / "killed" / ".staging"
    deadline = time.time() + 60
    while time.time() < deadline:
        markers = list(staging.glob("*/pass-0/tasks/*.json"))
        if len(markers) >= 2:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list(staging.glob("*/pass-0/tasks/*.json")))
    assert 2 <= done_before < 6, "the kill must land mid-run"
    assert not (tmp_path / "killed" / "docs").exists()  # no version without a manifest

    resumed = subprocess.run(_cli(config, tmp_path / "killed"), cwd=REPO, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    # pass 0: the unfinished tasks run again, the finished ones are skipped; pass 1 (dedup) runs all 6
    assert f"{6 - done_before + 6} run, {done_before} resumed" in resumed.stdout

    cfg["output"]["root"] = str(tmp_path / "clean")
    clean = run_pipeline(load_pipeline(cfg), progress=False)
    killed = Catalog(tmp_path / "killed").resolve("docs")
    assert killed.version_id == clean.version.version_id
    assert killed.manifest.rows == clean.version.manifest.rows == 273
    ids = killed.read(columns=["id"]).column("id").to_pylist()
    assert len(ids) == len(set(ids)) == 273


@pytest.mark.slow
@pytest.mark.ray
def test_local_and_ray_runs_give_the_same_rows_and_version(tmp_path, c4_docs):
    pytest.importorskip("ray")
    folder = _inputs(tmp_path, c4_docs, 3)
    local = run_pipeline(load_pipeline(_pipeline(tmp_path, folder, tmp_path / "local")), progress=False)
    ray_out = run_pipeline(load_pipeline(_pipeline(tmp_path, folder, tmp_path / "ray", kind="ray")), progress=False)
    assert ray_out.version.version_id == local.version.version_id
    assert ray_out.version.read(columns=["id"]).column("id").to_pylist() == \
        local.version.read(columns=["id"]).column("id").to_pylist()
    assert ray_out.rejects.version_id == local.rejects.version_id


def test_pool_workers_see_the_environment_of_the_run_not_of_the_forkserver(monkeypatch):
    """The forkserver keeps the environment it started with; object-store credentials set after it
    (in a notebook, or by a test fixture) must still reach the workers of the next run."""
    from corpus.executors.local import LocalTaskMap

    tasks = LocalTaskMap(2)
    monkeypatch.delenv("CIDERMILL_TEST_LATE_VAR", raising=False)
    assert tasks.map(os.getenv, ["CIDERMILL_TEST_LATE_VAR"] * 2) == [None, None]  # forkserver now running
    monkeypatch.setenv("CIDERMILL_TEST_LATE_VAR", "set-after-the-forkserver")
    assert tasks.map(os.getenv, ["CIDERMILL_TEST_LATE_VAR"] * 2) == ["set-after-the-forkserver"] * 2
    monkeypatch.delenv("CIDERMILL_TEST_LATE_VAR")
    assert tasks.map(os.getenv, ["CIDERMILL_TEST_LATE_VAR"] * 2) == [None, None]


def test_a_broadcast_value_is_used_as_it_is_in_the_driver_and_loaded_once_in_each_worker(tmp_path):
    """corpus/executors/local.py: a one-worker run's tasks (in the driver) get the value the build holds, not a
    reload of its saved copy; pool workers load the saved copy; the value itself is never pickled."""
    import pickle
    from operator import attrgetter, methodcaller

    from corpus.executors.local import LocalTaskMap
    from corpus.dedup.spill import as_location
    from corpus.stage import StoredShared

    saved = as_location(str(tmp_path / "index.npz"))
    shared = LocalTaskMap(2).broadcast(["in", "memory"], saved=saved, load=attrgetter("uri"))
    assert shared.get() == ["in", "memory"]
    assert LocalTaskMap(1).map(methodcaller("get"), [shared, shared]) == [["in", "memory"]] * 2
    assert LocalTaskMap(2).map(methodcaller("get"), [shared, shared]) == [saved.uri] * 2
    copy = pickle.loads(pickle.dumps(shared))
    assert type(copy) is StoredShared and copy.location == saved and "memory" not in repr(pickle.dumps(shared))
