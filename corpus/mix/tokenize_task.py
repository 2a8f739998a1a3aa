"""One tokenize task: a row range of one Parquet shard -> `part-NNNNN.bin/.idx` + a completion marker.

Documents are encoded in batches (bounded memory: one batch of text and ids at a time) and written
through megatron-core's `IndexedDatasetBuilder`, one document per `add_document`, each followed by
the tokenizer's EOD id, as Megatron-LM's preprocess_data.py does with `--append-eod`.

Crash safety is the executor's (corpus/executors/task.py `read_marker`/`write_marker`): outputs go to
their final names, then the marker is written atomically; a task without a marker is redone from
scratch, one with a marker (whose files are all there at the recorded sizes) is skipped.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from manifests.errors import ShardError
from manifests.storage import Location

from corpus.executors.task import marker_json, read_marker, write_marker
from corpus.mix.tokenizer.base import Tokenizer

log = logging.getLogger("cidermill.tokenize")
EMPTY_TEXT = "empty_text"


def indexed_dataset():
    """megatron-core's indexed_dataset module (importing it loads torch and megatron.core: ~5 s)."""
    from megatron.core.datasets import indexed_dataset as mod

    return mod


@dataclass(frozen=True)
class TokenizeTask:
    index: int
    shard: Location  # the source Parquet shard
    shard_rel: str  # its path inside the source version (for the manifest)
    row_start: int
    row_end: int  # exclusive
    text_field: str
    workdir: Location  # staging directory: part files and markers
    dtype: str  # numpy dtype name for token ids
    batch_rows: int = 1024

    @property
    def prefix(self) -> str:
        return self.workdir.join(f"part-{self.index:05d}").path

    @property
    def marker(self) -> Location:
        return self.workdir.join(f"part-{self.index:05d}.done")


@dataclass
class TaskOutcome:
    index: int
    shard_rel: str
    row_start: int
    row_end: int
    documents: int = 0
    tokens: int = 0
    dropped: dict = field(default_factory=dict)
    bin_bytes: int = 0
    idx_bytes: int = 0
    seconds: float = 0.0
    resumed: bool = False

    def to_json(self) -> str:
        return marker_json(self)


def completed(task: TokenizeTask) -> TaskOutcome | None:
    """The outcome recorded by the task's marker (the executor's one marker check), or None: redo it."""
    def files(d: dict) -> list[tuple[Location, int]]:
        if d["index"] != task.index:
            raise ValueError(f"marker is for task {d['index']}")
        return [(Location.parse(task.prefix + ".bin"), d["bin_bytes"]), (Location.parse(task.prefix + ".idx"), d["idx_bytes"])]

    d = read_marker(task.marker, files=files, what=f"tokenize task {task.index}")
    return None if d is None else TaskOutcome(**d, resumed=True)


def _row_groups(meta: pq.FileMetaData, start: int, end: int) -> tuple[list[int], int]:
    """Row groups overlapping [start, end) and the file row number the first of them starts at."""
    groups, first_row, offset = [], None, 0
    for g in range(meta.num_row_groups):
        n = meta.row_group(g).num_rows
        if offset < end and offset + n > start:
            groups.append(g)
            if first_row is None:
                first_row = offset
        offset += n
    return groups, first_row or 0


def _iter_texts(task: TokenizeTask):
    """Yield string arrays of the task's rows, `batch_rows` at a time."""
    shard = task.shard
    try:
        f = shard.fs.open_input_file(shard.path)
        pf = pq.ParquetFile(f)
    except (OSError, pa.ArrowInvalid) as exc:
        raise ShardError(shard.uri, f"cannot open Parquet shard ({exc})") from exc
    with f:
        if task.text_field not in pf.schema_arrow.names:
            raise ShardError(shard.uri, f"no column {task.text_field!r} (columns: {', '.join(pf.schema_arrow.names)})")
        groups, row = _row_groups(pf.metadata, task.row_start, task.row_end)
        for batch in pf.iter_batches(batch_size=task.batch_rows, row_groups=groups, columns=[task.text_field]):
            lo, hi = max(task.row_start - row, 0), min(task.row_end - row, batch.num_rows)
            row += batch.num_rows
            if hi > lo:
                yield batch.column(0).slice(lo, hi - lo)
            if row >= task.row_end:
                break


def run_tokenize_task(task: TokenizeTask, tokenizer: Tokenizer) -> TaskOutcome:
    done = completed(task)
    if done is not None:
        return done
    idx_mod = indexed_dataset()
    start = time.perf_counter()
    for suffix in (".bin", ".idx"):  # leftovers of a killed attempt
        Location.parse(task.prefix + suffix).delete()
    dtype = np.dtype(task.dtype)
    eod = tokenizer.eod_id
    out = TaskOutcome(index=task.index, shard_rel=task.shard_rel, row_start=task.row_start, row_end=task.row_end)
    builder = idx_mod.IndexedDatasetBuilder(task.prefix + ".bin", dtype=dtype.type)
    try:
        for texts in _iter_texts(task):
            if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
                raise ShardError(task.shard.uri, f"column {task.text_field!r} is {texts.type}, not a string")
            docs = [t for t in texts.to_pylist() if t]  # null or "": nothing to train on
            n_empty = len(texts) - len(docs)
            if n_empty:
                out.dropped[EMPTY_TEXT] = out.dropped.get(EMPTY_TEXT, 0) + n_empty
            for ids in tokenizer.encode_batch(docs):
                arr = np.empty(len(ids) + 1, dtype=dtype)
                arr[:-1] = ids
                arr[-1] = eod
                builder.add_document(arr, [arr.size])
                out.tokens += arr.size
            out.documents += len(docs)
        builder.finalize(task.prefix + ".idx")
    except BaseException:
        builder.data_file.close()
        raise
    out.bin_bytes = Location.parse(task.prefix + ".bin").size()
    out.idx_bytes = Location.parse(task.prefix + ".idx").size()
    out.seconds = time.perf_counter() - start
    write_marker(task.marker, out.to_json(), what=f"tokenize task {task.index}")
    return out

