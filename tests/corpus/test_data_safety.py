"""Data safety of runs (issue 14): concurrent runs, kill -9, full disks, schema drift, duplicate
ids, runs that keep nothing, clear errors, and a dry run that checks what the run checks."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from corpus.executors import NothingKept, run_pipeline
from corpus.pipeline import describe_plan, load_pipeline
from manifests import Catalog, ConfigError, FatalError

from ..conftest import REPO, write_jsonl
from . import slow_stage  # noqa: F401  (registers test_sleep_v1)


def _jsonl(folder: Path, docs: list[dict], n_files: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    per = len(docs) // n_files
    for i in range(n_files):
        write_jsonl(folder / f"part-{i:02d}.jsonl", docs[i * per:(i + 1) * per])
    return folder


def _cfg(folder: Path, root: Path, *, stages=None, fmt="jsonl", pattern="*.jsonl", **kw) -> dict:
    cfg = {
        "name": "docs",
        "input": {"format": fmt, "paths": [str(folder / pattern)]},
        "output": {"root": str(root), "row_group_rows": 64},
        "executor": {"kind": "local", "workers": 1, "batch_rows": 50},
        "stages": stages if stages is not None else [{"text_length_v1": {"min_chars": 200, "min_words": 50}}],
    }
    for key, value in kw.items():
        section, _, sub = key.partition("__")
        cfg[section][sub] = value
    return cfg


def _cli(config: Path, *extra: str) -> list[str]:
    code = ("import sys, tests.corpus.slow_stage; from manifests.main import main; "
            f"sys.exit(main(['corpus', 'run', {str(config)!r}, '--no-progress', *{list(extra)!r}]))")
    return [sys.executable, "-c", code]


def _write(path: Path, cfg: dict) -> Path:
    path.write_text(yaml.safe_dump(cfg))
    return path


def _tmp_files(root: Path) -> list[str]:
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if ".tmp-" in f]


# ---- concurrent runs -------------------------------------------------------------------------
@pytest.mark.slow
def test_a_second_identical_run_says_who_holds_the_run(tmp_path, c4_docs):
    folder = _jsonl(tmp_path / "in", c4_docs[:60], 2)
    cfg = _cfg(folder, tmp_path / "root", stages=[{"test_sleep_v1": {"seconds_per_batch": 1.0}}],
               executor__batch_rows=5)  # 12 batches, 12 s: the second run starts while the first holds it
    first = subprocess.Popen(_cli(_write(tmp_path / "a.yaml", cfg)), cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    locks = tmp_path / "root" / ".locks"
    deadline = time.time() + 60
    while time.time() < deadline and not any(p.stat().st_size for p in locks.glob("run-*.lock")):
        time.sleep(0.05)
    cfg["executor"]["lock_wait_s"] = 0
    second = subprocess.run(_cli(_write(tmp_path / "b.yaml", cfg)), cwd=REPO, capture_output=True, text=True)
    assert second.returncode == 1
    assert f"is locked by pid {first.pid}" in second.stderr
    assert first.wait(timeout=120) == 0, first.stderr
    assert len(Catalog(tmp_path / "root").versions("docs")) == 1


@pytest.mark.slow
def test_concurrent_identical_runs_both_succeed_with_one_version(tmp_path, c4_docs):
    folder = _jsonl(tmp_path / "in", c4_docs[:90], 3)
    cfg = _cfg(folder, tmp_path / "root", stages=[{"test_sleep_v1": {"seconds_per_batch": 0.05}},
                                                 {"text_length_v1": {"min_chars": 200, "min_words": 50}}])
    config = _write(tmp_path / "p.yaml", cfg)
    procs = [subprocess.Popen(_cli(config), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    ids = {line.split("@")[1] for out, _ in outs for line in out.splitlines() if line.startswith("version")}
    cat = Catalog(tmp_path / "root")
    [v] = cat.versions("docs")
    assert ids == {v.version_id}
    assert cat.resolve("docs").verify() == [] and cat.resolve("docs.rejects").verify() == []
    assert not any((tmp_path / "root" / ".staging").iterdir())


# ---- kill -9: no orphans, nothing written after ----------------------------------------------
def _session_pids(sid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                pids.append(int(entry))
    return pids


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_die_with_a_killed_run_and_write_nothing_after(tmp_path, c4_docs):
    folder = _jsonl(tmp_path / "in", c4_docs, 6)
    cfg = _cfg(folder, tmp_path / "root", stages=[{"test_sleep_v1": {"seconds_per_batch": 0.3}}],
               executor__workers=2)
    proc = subprocess.Popen(_cli(_write(tmp_path / "p.yaml", cfg)), cwd=REPO, start_new_session=True)
    staging = tmp_path / "root" / ".staging"
    deadline = time.time() + 60
    while time.time() < deadline and len(list(staging.glob("*/pass-0/tasks/*.json"))) < 1:
        time.sleep(0.05)
    assert len(_session_pids(proc.pid)) >= 3  # the run, the forkserver, workers
    os.kill(proc.pid, signal.SIGKILL)  # the run only, not its process group
    proc.wait()
    deadline = time.time() + 10
    while time.time() < deadline and _session_pids(proc.pid):
        time.sleep(0.1)
    assert _session_pids(proc.pid) == []
    before = sorted(str(p) for p in staging.rglob("*"))
    time.sleep(1.5)  # > 4 batches of the slow stage: a live worker would have written by now
    assert sorted(str(p) for p in staging.rglob("*")) == before


# ---- markers ---------------------------------------------------------------------------------
@pytest.mark.parametrize("content", [b"", b"{not json", b'{"index": 7}'])
def test_a_rerun_recovers_from_empty_or_corrupt_markers(tmp_path, c4_docs, content):
    folder = _jsonl(tmp_path / "in", c4_docs[:60], 2)
    cfg = _cfg(folder, tmp_path / "clean")
    clean = run_pipeline(load_pipeline(cfg), progress=False)
    cfg["output"]["root"] = str(tmp_path / "root")
    p = load_pipeline(cfg)
    staging = p.catalog().staging_dir(p.name, p.run_key(p.inputs()))
    for i in range(2):  # what a crash or a concurrent run used to leave behind
        marker = Path(staging.path) / "pass-0" / "tasks" / f"{i:05d}.json"
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_bytes(content)
    out = run_pipeline(p, progress=False)
    assert out.tasks_run == 2 and out.tasks_resumed == 0
    assert out.version.version_id == clean.version.version_id


# ---- schema drift ----------------------------------------------------------------------------
def _parquet_inputs(folder: Path, second_text: pa.Array) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": ["a0", "a1"], "text": pa.array(["alpha one", "alpha two"], pa.string())}),
                   folder / "a.parquet")
    pq.write_table(pa.table({"id": ["b0", "b1"], "text": second_text}), folder / "b.parquet")
    return folder


@pytest.mark.parametrize("second", [pa.array(["beta one", "beta two"], pa.large_string()), pa.array([1, 2])])
def test_inputs_with_different_schemas_are_refused_before_any_work(tmp_path, second):
    folder = _parquet_inputs(tmp_path / "in", second)
    cfg = _cfg(folder, tmp_path / "root", fmt="parquet", pattern="*.parquet", stages=[])
    p = load_pipeline(cfg)
    for check in (describe_plan, lambda p: run_pipeline(p, progress=False)):  # the dry run refuses too
        with pytest.raises(ConfigError, match=r"b\.parquet: column 'text' is (large_string|int64), but .*a\.parquet"):
            check(p)
    assert not (tmp_path / "root" / ".staging").exists()


def test_an_explicit_cast_unifies_the_inputs(tmp_path):
    folder = _parquet_inputs(tmp_path / "in", pa.array([1, 2]))
    out = run_pipeline(load_pipeline(_cfg(folder, tmp_path / "root", fmt="parquet", pattern="*.parquet",
                                          stages=[], input__cast={"text": "string"})), progress=False)
    assert out.version.schema.field("text").type == pa.string()
    assert out.version.read().column("text").to_pylist() == ["alpha one", "alpha two", "1", "2"]
    assert out.version.verify() == []
    with pytest.raises(ConfigError, match="'strng' is not an Arrow type"):
        load_pipeline(_cfg(folder, tmp_path / "root", fmt="parquet", input__cast={"text": "strng"}))


def test_staged_outputs_with_different_schemas_are_refused_naming_the_input(tmp_path):
    # Inputs that are not Parquet (or stages) can still yield different types per task; the last
    # check before publishing reads every staged shard's footer.
    from corpus.executors.finish import output_schema
    from corpus.executors.task import TaskResult
    from manifests.shards import ShardWriter
    from manifests.storage import Location

    staging = Location.parse(tmp_path)
    results = []
    for i, col in enumerate([pa.array(["x"]), pa.array(["y"], pa.large_string())]):
        w = ShardWriter(staging.join("shards"), f"part-{i:05d}", relative_dir="shards")
        w.write(pa.table({"id": [f"r{i}"], "text": col}))
        results.append(TaskResult(index=i, input_key=f"in-{i}.jsonl", shards=w.close(), rejects=[], stats=[]))
    assert output_schema(staging, results[:1]).field("text").type == pa.string()
    with pytest.raises(FatalError, match=r"output of input in-1\.jsonl: column 'text' is large_string, "
                                         r"but the output of in-0\.jsonl has string"):
        output_schema(staging, results)


# ---- duplicate ids ---------------------------------------------------------------------------
def _dup_id_inputs(folder: Path, c4_docs) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    docs = [{"doc_id": f"d{i}", "text": d["text"]} for i, d in enumerate(c4_docs[:20])]
    write_jsonl(folder / "a.jsonl", docs)
    write_jsonl(folder / "b.jsonl", [{**d, "text": d["text"] + " (copy)"} for d in docs])
    return folder


def test_duplicate_ids_are_an_error_by_default(tmp_path, c4_docs):
    folder = _dup_id_inputs(tmp_path / "in", c4_docs)
    cfg = _cfg(folder, tmp_path / "root", stages=[], input__options={"id_field": "doc_id"})
    with pytest.raises(FatalError, match=r"20 ids occur more than once .*'d0' in a\.jsonl, b\.jsonl"):
        run_pipeline(load_pipeline(cfg), progress=False)
    assert Catalog(tmp_path / "root").versions() == []


def test_duplicate_ids_can_be_dropped_with_reason_duplicate_id(tmp_path, c4_docs):
    folder = _dup_id_inputs(tmp_path / "in", c4_docs)
    cfg = _cfg(folder, tmp_path / "root", stages=[], input__options={"id_field": "doc_id"},
               output__unique_ids="drop")
    out = run_pipeline(load_pipeline(cfg), progress=False)
    kept = out.version.read()
    assert kept.num_rows == 20 and sorted(kept.column("id").to_pylist()) == sorted(f"d{i}" for i in range(20))
    assert not any(t.endswith("(copy)") for t in kept.column("text").to_pylist())  # the first of each id stays
    rejects = out.rejects.read()
    assert rejects.num_rows == 20
    assert set(rejects.column("drop_reason").to_pylist()) == {"duplicate_id"}
    assert {s.name: s for s in out.stats}["unique_ids"].dropped == {"duplicate_id": 20}
    assert out.version.verify() == []


# ---- a run that keeps nothing ----------------------------------------------------------------
def test_a_run_that_keeps_nothing_publishes_its_rejects_and_exits_1(tmp_path, c4_docs):
    folder = _jsonl(tmp_path / "in", c4_docs[:30], 2)
    cfg = _cfg(folder, tmp_path / "root", stages=[{"text_length_v1": {"min_chars": 10**7}}])
    with pytest.raises(NothingKept, match="kept no rows of 30 read, so no version was published") as info:
        run_pipeline(load_pipeline(cfg), progress=False)
    assert info.value.rejects.manifest.rows == 30
    cat = Catalog(tmp_path / "root")
    assert [e.name for e in cat.versions()] == ["docs.rejects"]
    assert not any((tmp_path / "root" / ".staging").iterdir())
    cli = subprocess.run(_cli(_write(tmp_path / "p.yaml", cfg)), cwd=REPO, capture_output=True, text=True)
    assert cli.returncode == 1
    assert "text_length_v1" in cli.stdout and "too_short" in cli.stdout  # the stats are printed
    assert "rejects   docs.rejects@" in cli.stdout and "kept no rows" in cli.stderr


# ---- full disk, read-only and non-directory roots -------------------------------------------
def test_a_full_disk_in_a_task_is_one_line_and_leaves_no_temp_files(tmp_path, c4_docs, monkeypatch):
    import pyarrow.parquet as pq_mod

    folder = _jsonl(tmp_path / "in", c4_docs[:120], 2)
    cfg = _cfg(folder, tmp_path / "root", stages=[])
    real = pq_mod.ParquetWriter.write_table
    calls = {"n": 0}

    def full_on_second(self, table, *a, **kw):
        calls["n"] += 1
        if calls["n"] >= 2:  # the second shard meets a full disk
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, table, *a, **kw)

    monkeypatch.setattr(pq_mod.ParquetWriter, "write_table", full_on_second)
    with pytest.raises(FatalError) as info:
        run_pipeline(load_pipeline(cfg), progress=False)
    assert "\n" not in str(info.value) and "No space left on device" in str(info.value)
    assert _tmp_files(tmp_path / "root") == []
    assert Catalog(tmp_path / "root").versions() == []
    monkeypatch.setattr(pq_mod.ParquetWriter, "write_table", real)  # space again: the rerun resumes
    out = run_pipeline(load_pipeline(cfg), progress=False)
    assert out.version.manifest.rows == 120


def test_a_root_that_is_a_file_is_a_one_line_error_before_any_work(tmp_path, c4_docs):
    folder = _jsonl(tmp_path / "in", c4_docs[:10], 1)
    (tmp_path / "afile").write_text("x")
    p = load_pipeline(_cfg(folder, tmp_path / "afile" / "root"))
    for check in (describe_plan, lambda p: run_pipeline(p, progress=False)):
        with pytest.raises(ConfigError, match=r"afile is a file, not a directory"):
            check(p)


def test_a_read_only_root_is_a_one_line_error(tmp_path, c4_docs, monkeypatch):
    folder = _jsonl(tmp_path / "in", c4_docs[:10], 1)
    root = tmp_path / "ro"
    root.mkdir()
    p = load_pipeline(_cfg(folder, root))
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if str(path) == str(root) else real_access(path, mode))
    with pytest.raises(ConfigError, match=r"cannot write to .*ro \((read-only filesystem|no write permission)\)"):
        run_pipeline(p, progress=False)


# ---- config and plan checks ------------------------------------------------------------------
@pytest.mark.parametrize("name", ["my docs", "-docs", "a@b", "docs.rejects"])
def test_bad_output_names_are_config_errors(tmp_path, name):
    cfg = _cfg(tmp_path, tmp_path / "root")
    cfg["name"] = name
    with pytest.raises(ConfigError, match="dataset name"):
        load_pipeline(cfg)


@pytest.mark.parametrize(("size", "reason"), [(0, "must be > 0"), ("0MiB", "must be > 0"), (-5, "-5 is not a size")])
def test_a_zero_or_negative_shard_target_is_a_config_error(tmp_path, size, reason):
    with pytest.raises(ConfigError, match=f"shard_target_bytes.*{reason}"):
        load_pipeline(_cfg(tmp_path, tmp_path / "root", output__shard_target_bytes=size))


def test_a_global_stage_first_on_jsonl_runs_and_the_dry_run_shows_the_copy_pass(tmp_path, c4_docs):
    folder = _jsonl(tmp_path / "in", c4_docs[:40] + c4_docs[:10], 2)
    p = load_pipeline(_cfg(folder, tmp_path / "root", stages=[{"exact_dedup_v1": {}}]))
    plan = describe_plan(p)
    assert "pass 0:\npass 1:\n  - exact_dedup_v1 [global]" in plan
    out = run_pipeline(p, progress=False)
    assert out.version.manifest.rows == 40
    assert {s.name: s for s in out.stats}["exact_dedup_v1"].dropped == {"duplicate": 10}


def test_an_unreachable_ray_address_fails_fast_with_a_clear_message(tmp_path, c4_docs):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    folder = _jsonl(tmp_path / "in", c4_docs[:10], 1)
    config = _write(tmp_path / "p.yaml", _cfg(folder, tmp_path / "root"))
    t0 = time.monotonic()
    out = subprocess.run(_cli(config, "--address", f"127.0.0.1:{port}"), cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert time.monotonic() - t0 < 30
    assert out.returncode == 1
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
