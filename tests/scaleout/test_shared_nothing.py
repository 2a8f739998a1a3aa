"""The driver learns every output from the tasks' results, never from its own disk.

A test double stands in for a second machine: the executor runs one task with its staging paths
moved to another folder ("node 2's disk", which the driver cannot see), as a worker with its own
local data root would. The driver must say which file it cannot see and publish nothing; before
issue 22 it built the rejects from the completion markers on its own disk, so it made a rejects
version with 2 of the 3 tasks' rows.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from corpus.executors.local import LocalExecutor
from corpus.executors.task import TaskSpec
from corpus.pipeline import load_pipeline
from manifests import Catalog
from manifests.errors import FatalError
from manifests.storage import Location

from ..conftest import write_jsonl


def _config(folder: Path, root: Path) -> dict:
    return {
        "name": "docs",
        "input": {"format": "jsonl", "paths": [str(folder / "*.jsonl.gz")]},
        "output": {"root": str(root), "row_group_rows": 64},
        "executor": {"kind": "local", "workers": 1, "batch_rows": 50},
        "stages": [{"text_length_v1": {"min_chars": 200, "min_words": 50}}],
    }


class OtherDiskExecutor(LocalExecutor):
    """Runs task `index` on "another machine": its staging paths land under `other` instead of the root."""

    def __init__(self, pipeline, *, root: Path, other: Path, index: int):
        super().__init__(pipeline, progress=False)
        self.root, self.other, self.index = str(root), str(other), index

    def _move(self, loc: Location | None) -> Location | None:
        return None if loc is None else Location(loc.fs, loc.path.replace(self.root, self.other, 1))

    def run_tasks(self, specs: list[TaskSpec], stage_names: list[str]):
        specs = [dataclasses.replace(s, shards_dir=self._move(s.shards_dir), rejects_dir=self._move(s.rejects_dir),
                                     marker=self._move(s.marker)) if s.index == self.index else s
                 for s in specs]
        return super().run_tasks(specs, stage_names)


def _inputs(tmp_path: Path, parts: list[list[dict]]) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    for i, docs in enumerate(parts):
        write_jsonl(folder / f"part-{i}.jsonl.gz", docs, compress="gz")
    return folder


def _short(docs: list[dict]) -> list[dict]:
    return [d for d in docs if len(d["text"].split()) < 50]


def test_rejects_written_on_another_machine_are_not_left_out(tmp_path, c4_docs):
    """The reported bug: the task on node 2 keeps no row (so the main version needs none of its
    files) and drops 13; its rejects and marker are on node 2's disk. The rejects version must not
    be published without them."""
    short = _short(c4_docs)
    assert len(short) >= 13
    folder = _inputs(tmp_path, [c4_docs[:100], short[:13], c4_docs[100:200]])
    root, other = tmp_path / "root", tmp_path / "node2"
    pipeline = load_pipeline(_config(folder, root))
    with pytest.raises(FatalError) as err:
        OtherDiskExecutor(pipeline, root=root, other=other, index=1).run()
    message = str(err.value)
    assert "rejects/p0-part-00001-000.parquet" in message and "task 1 (input part-1.jsonl.gz)" in message
    assert Catalog(root).versions() == []
    assert not (root / "docs.rejects").exists()
    assert list(other.rglob("p0-part-00001-000.parquet"))


def test_outputs_the_driver_cannot_see_are_an_error_naming_them(tmp_path, c4_docs):
    folder = _inputs(tmp_path, [c4_docs[i * 100:(i + 1) * 100] for i in range(3)])
    root, other = tmp_path / "root", tmp_path / "node2"
    pipeline = load_pipeline(_config(folder, root))
    executor = OtherDiskExecutor(pipeline, root=root, other=other, index=1)
    with pytest.raises(FatalError) as err:
        executor.run()
    message = str(err.value)
    assert "part-00001-000.parquet" in message and "task 1 (input part-1.jsonl.gz)" in message
    assert "\n" not in message
    # nothing was published: no version, no partial rejects, no LATEST
    assert Catalog(root).versions() == []
    assert not (root / "docs").exists() and not (root / "docs.rejects").exists()
    # the task did run "on node 2": its outputs are there, out of the driver's sight
    assert list(other.rglob("part-00001-000.parquet"))
