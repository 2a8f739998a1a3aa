"""Issue 35, runs: a resume reuses a task only for the same input bytes; a failed run pins no stale
facts; a version read as input is checked against its manifest; rejects keep their ids and text."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import corpus.executors.local as local_executor
from corpus.executors import run_pipeline
from corpus.pipeline import describe_plan, load_pipeline
from manifests import Catalog, ConfigError, FatalError
from manifests.manifest import MANIFEST_NAME

from ..conftest import write_jsonl


def _cfg(folder: Path, root: Path, *, stages, pattern="*.jsonl", fmt="jsonl", **sections) -> dict:
    cfg = {
        "name": "docs",
        "input": {"format": fmt, "paths": [str(folder / pattern)]},
        "output": {"root": str(root), "row_group_rows": 64},
        "executor": {"kind": "local", "workers": 1, "batch_rows": 50},
        "stages": stages,
    }
    for section, values in sections.items():
        cfg[section].update(values)
    return cfg


def _docs(prefix: str, n: int) -> list[dict]:
    # equal lengths, so that an edit can keep every file's size (the run key then stays the same)
    return [{"text": f"{prefix} document number {i:04d} " + "lorem ipsum dolor sit amet " * 12} for i in range(n)]


def _stop_at(monkeypatch, *, pass_k: int, index: int):
    """Make the run die when it reaches task `index` of pass `pass_k`, as a kill would: the tasks before
    it finished and wrote their markers, nothing else happened."""
    real = local_executor.run_task

    def run_task(spec):
        if f"pass-{pass_k}/tasks/{index:05d}" in spec.marker.path:
            raise FatalError("killed (simulated)")
        return real(spec)

    monkeypatch.setattr(local_executor, "run_task", run_task)
    return lambda: monkeypatch.setattr(local_executor, "run_task", real)


def _texts(version) -> list[str]:
    return version.read(columns=["text"]).column("text").to_pylist()


def _three_files_killed_at(tmp_path, monkeypatch, index: int, compress: str | None = None) -> tuple[Path, dict]:
    """Three inputs; the run dies when it reaches task `index` (the ones before it finished)."""
    folder = tmp_path / "in"
    folder.mkdir()
    suffix = f".{compress}" if compress else ""
    for k in range(3):
        write_jsonl(folder / f"part-{k}.jsonl{suffix}", _docs(f"file{k}", 4), compress=compress)
    cfg = _cfg(folder, tmp_path / "root", pattern=f"*.jsonl{suffix}", stages=[{"text_length_v1": {"min_chars": 10}}])
    restore = _stop_at(monkeypatch, pass_k=0, index=index)
    with pytest.raises(FatalError, match="killed"):
        run_pipeline(load_pipeline(cfg), progress=False)
    restore()
    return folder, cfg


def test_a_resume_redoes_a_finished_task_whose_input_was_edited_to_the_same_size(tmp_path, monkeypatch):
    folder, cfg = _three_files_killed_at(tmp_path, monkeypatch, 1)
    first = folder / "part-0.jsonl"
    edited = first.read_bytes().replace(b"file0 document", b"FILE0 document")
    assert len(edited) == first.stat().st_size
    first.write_bytes(edited)
    out = run_pipeline(load_pipeline(cfg), progress=False)
    clean = run_pipeline(load_pipeline(_cfg(folder, tmp_path / "clean", stages=cfg["stages"])), progress=False)
    assert out.tasks_resumed == 0  # task 0's marker is for other bytes: redone
    assert out.version.version_id == clean.version.version_id
    assert sum(t.startswith("FILE0 document") for t in _texts(out.version)) == 4
    assert not any(t.startswith("file0 document") for t in _texts(out.version))


@pytest.mark.parametrize("compress", [None, "gz", "zst"])
def test_a_resume_still_reuses_tasks_whose_input_is_unchanged(tmp_path, monkeypatch, compress):
    # (a .gz input was once hashed decompressed on resume and compressed when read: nothing resumed)
    _, cfg = _three_files_killed_at(tmp_path, monkeypatch, 2, compress)
    out = run_pipeline(load_pipeline(cfg), progress=False)
    assert (out.tasks_resumed, out.tasks_run) == (2, 1)


def test_a_global_stage_built_before_a_kill_is_rebuilt_when_an_input_changed(tmp_path, monkeypatch):
    folder = tmp_path / "in"
    folder.mkdir()
    a, b = _docs("alpha", 3), _docs("omega", 3)
    write_jsonl(folder / "part-0.jsonl", a)
    write_jsonl(folder / "part-1.jsonl", b)
    cfg = _cfg(folder, tmp_path / "root", stages=[{"exact_dedup_v1": {}}])
    restore = _stop_at(monkeypatch, pass_k=1, index=1)  # the dedup index of pass 1 is built and saved by then
    with pytest.raises(FatalError):
        run_pipeline(load_pipeline(cfg), progress=False)
    restore()
    a[0] = b[2]  # same length: part-0 now repeats a document of part-1
    write_jsonl(folder / "part-0.jsonl", a)
    out = run_pipeline(load_pipeline(cfg), progress=False)
    clean = run_pipeline(load_pipeline(_cfg(folder, tmp_path / "clean", stages=cfg["stages"])), progress=False)
    assert out.version.version_id == clean.version.version_id
    assert {s.name: s for s in out.stats}["exact_dedup_v1"].dropped == {"duplicate": 1}
    assert _texts(out.version).count(b[2]["text"]) == 1


def test_a_failed_duplicate_id_run_succeeds_once_the_file_is_fixed(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    docs = [{"doc_id": f"d{i}", "text": f"text {i}"} for i in range(10)]
    write_jsonl(folder / "a.jsonl", docs)
    write_jsonl(folder / "b.jsonl", docs[:1] + [{"doc_id": f"e{i}", "text": f"text {i}"} for i in range(1, 10)])
    cfg = _cfg(folder, tmp_path / "root", stages=[], input={"options": {"id_field": "doc_id"}})
    with pytest.raises(FatalError, match=r"1 ids occur more than once .*'d0' in a\.jsonl, b\.jsonl"):
        run_pipeline(load_pipeline(cfg), progress=False)
    fixed = (folder / "b.jsonl").read_bytes().replace(b'"d0"', b'"e0"', 1)  # the fix the message asks for
    (folder / "b.jsonl").write_bytes(fixed)
    out = run_pipeline(load_pipeline(cfg), progress=False)
    ids = out.version.read(columns=["id"]).column("id").to_pylist()
    assert sorted(ids) == sorted([f"d{i}" for i in range(10)] + [f"e{i}" for i in range(10)])


# ---- a version read as input -----------------------------------------------------------------
def _two_versions(root: Path) -> tuple:
    cat = Catalog(root)
    t = pa.table({"id": [f"a{i}" for i in range(50)], "text": [f"alpha text {i}" for i in range(50)]})
    a = cat.write_table("src", t)
    b = cat.write_table("other", t.set_column(1, "text", pa.array([f"omega text {i}" for i in range(50)])))
    return cat, a, b


def test_a_version_whose_shard_was_replaced_by_another_valid_shard_is_refused_as_input(tmp_path):
    root = tmp_path / "root"
    cat, a, b = _two_versions(root)
    shard_a = root / "src" / a.version_id / a.manifest.shards[0].path
    shard_a.write_bytes((root / "other" / b.version_id / b.manifest.shards[0].path).read_bytes())
    cfg = {"name": "copy", "input": {"format": "parquet", "version": "src"}, "output": {"root": str(root)},
           "executor": {"workers": 1}, "stages": [{"text_length_v1": {"min_chars": 1}}]}
    with pytest.raises(FatalError, match=rf"{shard_a.name} \(a shard of src@{a.version_id[:12]}\): sha256 .* does "
                                         r"not match the manifest's .*cidermill data verify src@"):
        run_pipeline(load_pipeline(cfg), progress=False)
    assert [e.name for e in cat.versions()] == ["other", "src"]  # nothing published, no parent named


def test_a_damaged_version_shard_is_one_error_not_a_shard_error_first(tmp_path, caplog):
    root = tmp_path / "root"
    _, a, _ = _two_versions(root)
    shard_a = root / "src" / a.version_id / a.manifest.shards[0].path
    data = bytearray(shard_a.read_bytes())
    data[len(data) // 3] ^= 0xFF  # inside the data pages, the footer intact
    shard_a.write_bytes(bytes(data))
    cfg = {"name": "copy", "input": {"format": "parquet", "version": "src"}, "output": {"root": str(root)},
           "executor": {"workers": 1}, "stages": []}
    with pytest.raises(FatalError, match=rf"{shard_a.name} \(a shard of src@{a.version_id[:12]}\): sha256"):
        run_pipeline(load_pipeline(cfg), progress=False)
    assert [r for r in caplog.records if r.levelname == "ERROR"] == []


def test_a_version_shard_with_other_rows_is_refused_before_any_work(tmp_path):
    root = tmp_path / "root"
    cat, a, _ = _two_versions(root)
    shard_a = root / "src" / a.version_id / a.manifest.shards[0].path
    pq.write_table(pa.table({"id": ["x"], "text": ["short"]}), shard_a)
    cfg = {"name": "copy", "input": {"format": "parquet", "version": "src"}, "output": {"root": str(root)},
           "stages": []}
    for check in (describe_plan, lambda p: run_pipeline(p, progress=False)):
        with pytest.raises(ConfigError, match=r"holds 1 rows, its manifest says 50"):
            check(load_pipeline(cfg))


def test_a_version_read_as_input_is_its_output_s_parent_as_resolved(tmp_path):
    root = tmp_path / "root"
    _, a, _ = _two_versions(root)
    cfg = {"name": "copy", "input": {"format": "parquet", "version": "src"}, "output": {"root": str(root)},
           "executor": {"workers": 1}, "stages": []}
    out = run_pipeline(load_pipeline(cfg), progress=False)
    assert out.version.manifest.parents == [a.version_id]
    assert out.version.read().column("text").to_pylist() == a.read().column("text").to_pylist()


# ---- rejects keep what they are for ------------------------------------------------------------
def test_rejects_keep_an_int64_id_and_a_large_string_text(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64()),
                             "text": pa.array(["a long enough text", "x", "another long text"], pa.large_string())}),
                   folder / "polars.parquet")
    cfg = _cfg(folder, tmp_path / "root", fmt="parquet", pattern="*.parquet",
               stages=[{"text_length_v1": {"min_chars": 5}}])
    out = run_pipeline(load_pipeline(cfg), progress=False)
    rejects = out.rejects.read().to_pylist()
    assert [(r["id"], r["text"], r["drop_reason"]) for r in rejects] == [("2", "x", "too_short")]
    assert out.version.read().column("id").to_pylist() == [1, 3]


# ---- Parquet inputs the stages cannot read: one line before any work ----------------------------
@pytest.mark.parametrize("table, options, message", [
    (pa.table({"id": ["a"], "text": pa.array([{"body": "x"}])}), {}, r"column 'text' is struct<body: string>, not a string"),
    (pa.table({"id": ["a"], "body": ["x"]}), {}, r"reads column 'text', but the file has no such column \(its columns: id, body\)"),
    (pa.table({"id": ["a"], "text": ["x"]}), {"columns": ["id"]}, r"reads column 'text', but input.options.columns leaves it out"),
    (pa.table({"id": ["a"], "text": ["x"]}), {"columns": ["id", "txt"]}, r"input.options.columns names 'txt', which the file does not have"),
])
def test_parquet_inputs_without_a_readable_text_are_refused_by_the_dry_run(tmp_path, table, options, message):
    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(table, folder / "x.parquet")
    cfg = _cfg(folder, tmp_path / "root", fmt="parquet", pattern="*.parquet", input={"options": options},
               stages=[{"text_length_v1": {"min_chars": 1}}])
    for check in (describe_plan, lambda p: run_pipeline(p, progress=False)):
        with pytest.raises(ConfigError, match=rf"input .*x\.parquet: .*{message}") as info:
            check(load_pipeline(cfg))
        assert "\n" not in str(info.value)
    assert Catalog(tmp_path / "root").versions() == []


def test_a_stage_that_fails_mid_run_is_one_line_with_the_traceback_in_a_file(tmp_path, monkeypatch):
    from corpus.stages.text import TextLength

    def broken(self, table):
        raise KeyError("text")

    monkeypatch.setattr(TextLength, "reasons", broken)
    folder = tmp_path / "in"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", _docs("x", 3))
    with pytest.raises(FatalError) as info:
        run_pipeline(load_pipeline(_cfg(folder, tmp_path / "root", stages=[{"text_length_v1": {}}])), progress=False)
    msg = str(info.value)
    assert "\n" not in msg and "failed in text_length_v1: KeyError: 'text' (traceback: " in msg
    assert "KeyError" in Path(msg.rsplit("traceback: ", 1)[1].rstrip(")")).read_text()


def test_a_dry_run_names_the_run_key_without_promising_a_resume_it_may_not_do(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", _docs("x", 2))
    plan = describe_plan(load_pipeline(_cfg(folder, tmp_path / "root", stages=[])))
    assert "reuses finished tasks whose input bytes are unchanged" in plan and "resumes)" not in plan


def test_markers_record_the_input_hash_they_were_made_from(tmp_path, monkeypatch):
    import hashlib

    folder = tmp_path / "in"
    folder.mkdir()
    path = write_jsonl(folder / "a.jsonl.gz", _docs("x", 2), compress="gz")
    write_jsonl(folder / "b.jsonl.gz", _docs("y", 2), compress="gz")
    cfg = _cfg(folder, tmp_path / "root", pattern="*.jsonl.gz", stages=[])
    restore = _stop_at(monkeypatch, pass_k=0, index=1)
    with pytest.raises(FatalError):
        run_pipeline(load_pipeline(cfg), progress=False)
    restore()
    [marker] = (tmp_path / "root" / ".staging").glob("*/pass-0/tasks/00000.json")
    assert json.loads(marker.read_text())["input_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    root = tmp_path / "root"
    assert not list(root.glob("docs/*." + MANIFEST_NAME)) and not list(root.glob("docs/*/" + MANIFEST_NAME))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_marker_that_cannot_be_written_fails_the_run_after_the_others_are_on_disk(tmp_path, monkeypatch, workers):
    """Markers are written beside the work (one local worker: while the next task runs; a pool: by the run, as
    each result arrives): a marker write that fails (a full disk) still fails the run, naming the task, once every
    other marker is written; the resume reuses those."""
    import errno

    from manifests.storage import Location

    folder = tmp_path / "in"
    folder.mkdir()
    for k in range(3):
        write_jsonl(folder / f"part-{k}.jsonl", _docs(f"file{k}", 4))
    cfg = _cfg(folder, tmp_path / "root", stages=[{"text_length_v1": {"min_chars": 10}}],
               executor={"workers": workers})
    real = Location.write_bytes_atomic

    def full_disk_on_marker_1(self, data):
        if self.path.endswith("pass-0/tasks/00001.json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Location, "write_bytes_atomic", full_disk_on_marker_1)
    with pytest.raises(FatalError, match=r"task 1 \(input part-1.jsonl\): cannot write its marker: .*No space left"):
        run_pipeline(load_pipeline(cfg), progress=False)
    markers = sorted(p.name for p in (tmp_path / "root" / ".staging").glob("*/pass-0/tasks/*.json"))
    assert markers == ["00000.json", "00002.json"]
    monkeypatch.setattr(Location, "write_bytes_atomic", real)

    import corpus.executors.task as task_module

    reused = []
    real_completed = task_module._completed

    def recording(spec):
        done = real_completed(spec)
        reused.append((spec.index, done is not None))
        return done

    monkeypatch.setattr(task_module, "_completed", recording)  # seen in this process only (one worker)
    outcome = run_pipeline(load_pipeline(cfg), progress=False)
    assert sorted(_texts(outcome.version)) == sorted(d["text"] for k in range(3) for d in _docs(f"file{k}", 4))
    assert (outcome.tasks_run, outcome.tasks_resumed) == (1, 2)
    if workers == 1:
        assert reused == [(0, True), (1, False), (2, True)]
