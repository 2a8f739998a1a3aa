"""Issue 35, the command line: bad configs, inputs and roots end in one line on stderr (exit 2 for a
config error) before any work, in the dry run as in the run; never a traceback or a hang."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from manifests.main import main as cidermill

from ..conftest import write_jsonl


def _config(tmp_path: Path, **changes) -> Path:
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    write_jsonl(folder / "a.jsonl", [{"text": "one document"}, {"text": "another document"}])
    cfg = {"name": "docs", "input": {"format": "jsonl", "paths": [str(folder / "*")]},
           "output": {"root": str(tmp_path / "root")}, "executor": {"workers": 1}, "stages": []}
    cfg.update(changes)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _run(capsys, *argv: str) -> tuple[int, str]:
    code = cidermill(["corpus", "run", *argv, "--no-progress"])
    err = capsys.readouterr().err.strip()
    return code, err


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if not ln.startswith("WARNING")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("dry", [True, False])
def test_a_glob_matching_a_dangling_symlink_is_one_line(tmp_path, capsys, dry):
    config = _config(tmp_path)
    os.symlink(tmp_path / "gone.jsonl", tmp_path / "in" / "b.jsonl")
    code, err = _run(capsys, str(config), *(["--dry-run"] if dry else []))
    assert code == 2
    assert _one_line(err) == (f"config error: input.paths: {tmp_path / 'in' / 'b.jsonl'} is a symlink to "
                              f"'{tmp_path / 'gone.jsonl'}', which does not exist")


def test_a_glob_matching_a_symlink_loop_or_a_directory_is_one_line(tmp_path, capsys):
    config = _config(tmp_path)
    os.symlink(tmp_path / "in" / "loop", tmp_path / "in" / "loop")
    code, err = _run(capsys, str(config), "--dry-run")
    assert code == 2 and _one_line(err).endswith("loop is a symlink loop (it points back to itself)")
    os.unlink(tmp_path / "in" / "loop")
    (tmp_path / "in" / "sub").mkdir()
    code, err = _run(capsys, str(config), "--dry-run")
    assert code == 2 and "sub is a directory, and format 'jsonl' reads files" in _one_line(err)


def test_duplicate_keys_and_non_utf8_bytes_in_the_pipeline_file_are_one_line(tmp_path, capsys):
    config = _config(tmp_path)
    config.write_text(config.read_text() + "stages: [text_length_v1]\n")
    code, err = _run(capsys, str(config), "--dry-run")
    assert code == 2 and "key 'stages' is given twice in one mapping" in _one_line(err)
    config.write_bytes(b"name: d\xf6cs\n")
    code, err = _run(capsys, str(config), "--dry-run")
    assert code == 2 and "byte 0xf6 is not UTF-8" in _one_line(err)


@pytest.mark.parametrize("setting, message", [
    ("executor.batch_rows=1e20", "expected an integer, got '1e20'"),
    ("executor.batch_rows=100000000000000000000", "too large for an integer option"),
    ("output.shard_target_bytes=infGB", "'infGB' is not a size"),
    ("executor.lock_wait_s=.inf", "is not a finite number"),
])
def test_infinite_and_huge_numbers_on_the_command_line_are_one_line(tmp_path, capsys, setting, message):
    code, err = _run(capsys, str(_config(tmp_path)), "--dry-run", "--set", setting)
    assert code == 2 and message in _one_line(err)


def test_an_over_long_name_is_refused_by_validation(tmp_path, capsys):
    code, err = _run(capsys, str(_config(tmp_path, name="n" * 250)), "--dry-run")
    assert code == 2 and "is 250 characters; at most 128" in _one_line(err)


def test_an_hdfs_root_is_one_line(tmp_path, capsys):
    code, err = _run(capsys, str(_config(tmp_path)), "--dry-run", "--root", "hdfs://namenode:8020/cidermill")
    assert code == 2
    assert _one_line(err).startswith("config error: hdfs://namenode:8020/cidermill: storage scheme 'hdfs://' is not "
                                     "supported")


@pytest.mark.slow
def test_a_gcs_root_without_network_or_credentials_fails_in_seconds_in_one_line(tmp_path, capsys, monkeypatch):
    # the default limit (15 s) is what bounds the hang; 2 s here keeps the suite fast, the mechanism is the same
    monkeypatch.setattr("manifests.storage.GCS_RETRY_LIMIT_S", 2)
    start = time.monotonic()
    code, err = _run(capsys, str(_config(tmp_path)), "--dry-run", "--root", "gs://no-such-bucket-cidermill/x")
    assert time.monotonic() - start < 30
    if code == 0:
        pytest.skip("this machine reaches Google Cloud Storage with credentials")
    assert code == 2 and "the object store does not answer" in _one_line(err)
