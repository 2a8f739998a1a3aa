"""Issue 44: a Parquet input is hashed in a thread while the task reads it; the marker must still hold
sha256 of exactly the input's bytes (hashlib over the file here), and an input that changes while it is
read still stops the run."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from manifests.errors import FatalError
from manifests.storage import Location


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _table(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": [str(i) for i in range(start, start + n)],
                     "text": [f"row {i} " + "lorem ipsum " * (1 + i % 5) for i in range(start, start + n)]})


def _parquet_run(tmp_path: Path, monkeypatch, *, edit_during_read: bool = False):
    from corpus.executors import run_pipeline
    from corpus.pipeline import load_pipeline
    from corpus.readers import parquet as parquet_reader

    folder = tmp_path / "in"
    folder.mkdir()
    paths = []
    for k in range(2):
        paths.append(folder / f"in-{k}.parquet")
        pq.write_table(_table(400, start=400 * k), paths[-1], row_group_size=100)
    if edit_during_read:
        real = parquet_reader.ParquetReader.read

        def read(self, source, **kw):
            yield from real(self, source, **kw)
            with open(source.location.path, "ab") as f:  # grows while the task still holds the file
                f.write(b"x")
        monkeypatch.setattr(parquet_reader.ParquetReader, "read", read)
    cfg = {"name": "docs", "input": {"format": "parquet", "paths": [str(folder / "*.parquet")]},
           "output": {"root": str(tmp_path / "root"), "row_group_rows": 64},
           "executor": {"kind": "local", "workers": 1, "batch_rows": 50}, "stages": []}
    return paths, run_pipeline(load_pipeline(cfg), progress=False)


def test_a_parquet_input_hashed_while_read_records_hashlib_s_digest(tmp_path, monkeypatch):
    from corpus.executors import task as task_module

    markers = []
    real = task_module.write_marker
    monkeypatch.setattr(task_module, "write_marker", lambda m, payload, **kw: (markers.append(json.loads(payload)),
                                                                               real(m, payload, **kw)))
    paths, outcome = _parquet_run(tmp_path, monkeypatch)
    assert [m["input_sha256"] for m in markers] == [_sha(p) for p in paths]
    shards = outcome.version.manifest.shards
    assert [s.sha256 for s in shards] == [_sha(Path(loc.path)) for loc in outcome.version.shard_locations()]


def test_a_parquet_input_that_changes_while_read_stops_the_run(tmp_path, monkeypatch):
    with pytest.raises(FatalError, match=r"in-0\.parquet changed while the task read it"):
        _parquet_run(tmp_path, monkeypatch, edit_during_read=True)


def test_a_reader_hashes_in_the_background_only_when_asked(tmp_path):
    from corpus.readers import InputFile
    from corpus.readers.parquet import ParquetReader

    path = tmp_path / "a.parquet"
    pq.write_table(_table(10), path)
    source = InputFile(Location.parse(str(path)), "a.parquet")
    reader = ParquetReader()
    reader.begin(source)  # a staged shard of this run (hash known), or no core to spare: nothing started
    assert reader._pending_digest is None
    reader.begin(source, digest_in_background=True)
    assert reader._pending_digest is not None
    list(reader.read(source, batch_rows=4, on_record_error=lambda e: None))
    digest = reader.input_digest(source)
    assert (digest.sha256, digest.bytes) == (_sha(path), os.path.getsize(path))
