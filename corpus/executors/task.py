"""One task: one input file through a list of stages into one output shard (or a few, past the
target size). Executors differ only in where `run_task` runs.

Crash safety: shards are renamed into place when complete and the task's completion marker is
written after them, atomically. A task without a marker is redone from scratch after deleting
whatever it left; a task with one is skipped. A marker that does not parse, names another task,
or whose shards are missing or changed is deleted and the task redone, so a rerun always
recovers. So a killed run resumes without losing or duplicating rows.

A task run for a parent process (`owner_pid`) stops before each write once that parent is gone,
so nothing lands in staging after the run died (workers are also killed by PDEATHSIG, local.py).
"""

from __future__ import annotations

import json
import logging
import os
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from manifests.errors import FatalError, RecordError, RetryableError, ShardError
from manifests.manifest import ShardInfo, StageStats
from manifests.shards import ShardWriter
from manifests.storage import Location

from ..readers import InputFile, make_reader
from ..stage import DROP_REASON, DROP_STAGE, Stage

log = logging.getLogger("cidermill.task")
MAX_RECORD_ERRORS_KEPT = 20
READ_STAGE = "read"

REJECTS_SCHEMA = pa.schema([("id", pa.string()), ("source", pa.string()), ("text", pa.string()),
                            (DROP_STAGE, pa.string()), (DROP_REASON, pa.string()),
                            ("drop_detail", pa.string())])  # optional JSON a stage adds (what matched)


@dataclass
class TaskSpec:
    index: int
    input: InputFile
    reader_format: str
    reader_options: dict
    stages: list[Stage]
    shards_dir: Location  # where output shards go
    shards_rel: str  # their path relative to the version directory
    rejects_dir: Location | None
    rejects_prefix: str
    marker: Location
    batch_rows: int
    target_bytes: int
    row_group_rows: int
    progress: Any = None  # a queue taking (stage name, rows) messages, or None
    cast: dict = field(default_factory=dict)  # column -> Arrow type name, applied to what the reader yields
    owner_pid: int = 0  # the run's process, when this task runs in a worker on the same machine

    @property
    def prefix(self) -> str:
        return f"part-{self.index:05d}"


@dataclass
class TaskResult:
    index: int
    input_key: str
    shards: list[ShardInfo]
    rejects: list[ShardInfo]
    stats: list[StageStats]
    errors: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    resumed: bool = False

    def to_json(self) -> str:
        d = asdict(self)
        d.pop("resumed")
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> "TaskResult":
        d = json.loads(text)
        return cls(
            index=d["index"], input_key=d["input_key"],
            shards=[ShardInfo(**s) for s in d["shards"]], rejects=[ShardInfo(**s) for s in d["rejects"]],
            stats=[StageStats.from_dict(s) for s in d["stats"]], errors=d["errors"], seconds=d["seconds"],
            resumed=True,
        )


def _completed(spec: TaskSpec) -> TaskResult | None:
    if not spec.marker.exists():
        return None
    try:
        result = TaskResult.from_json(spec.marker.read_bytes())
        if result.index != spec.index or result.input_key != spec.input.key:
            raise ValueError(f"marker is for task {result.index} ({result.input_key})")
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("task %d: ignoring unreadable marker %s (%s); redoing", spec.index, spec.marker.uri, exc)
        spec.marker.delete()
        return None
    for info, base in [(s, spec.shards_dir) for s in result.shards] + \
                      [(s, spec.rejects_dir) for s in result.rejects]:
        loc = base.join(info.path.rsplit("/", 1)[-1])
        if not loc.exists() or loc.size() != info.bytes:
            log.warning("task %d: marker present but %s is missing or changed; redoing", spec.index, info.path)
            spec.marker.delete()
            return None
    return result


def _clear_leftovers(spec: TaskSpec) -> None:
    for directory, prefix in ((spec.shards_dir, spec.prefix), (spec.rejects_dir, spec.rejects_prefix + spec.prefix)):
        if directory is None:
            continue
        for loc in directory.listdir():
            if loc.name.startswith(prefix + "-") or loc.name.startswith(prefix + "."):
                loc.delete()


def _rejects_view(rejects: pa.Table) -> pa.Table:
    cols = {}
    for f in REJECTS_SCHEMA:
        if f.name in rejects.schema.names and rejects.schema.field(f.name).type == f.type:
            cols[f.name] = rejects.column(f.name)
        else:
            cols[f.name] = pa.nulls(rejects.num_rows, f.type)
    return pa.table(cols, schema=REJECTS_SCHEMA)


class OwnerGone(RuntimeError):
    """The run this task works for has died; the task stops without writing anything more."""


def _check_owner(spec: TaskSpec) -> None:
    if spec.owner_pid and spec.owner_pid != os.getpid():
        try:
            os.kill(spec.owner_pid, 0)
        except ProcessLookupError:
            raise OwnerGone(f"task {spec.index}: the run (pid {spec.owner_pid}) is gone; stopping") from None
        except PermissionError:
            pass  # alive, owned by someone else


def _apply_cast(table: pa.Table, cast: dict, spec: TaskSpec) -> pa.Table:
    for name, type_name in cast.items():
        if name not in table.schema.names:
            continue
        i = table.schema.get_field_index(name)
        target = pa.type_for_alias(type_name)
        if table.schema.field(i).type == target:
            continue
        try:
            table = table.set_column(i, name, pc.cast(table.column(i), target))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise FatalError(f"input {spec.input.key}: cannot cast column {name!r} to {type_name} "
                             f"as input.cast asks: {exc}") from None
    return table


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def run_task(spec: TaskSpec) -> TaskResult:
    _check_owner(spec)
    done = _completed(spec)
    if done is not None:
        return done
    _clear_leftovers(spec)
    start = time.perf_counter()
    read_stats = StageStats(READ_STAGE)
    stage_stats = [StageStats(s.name) for s in spec.stages]
    errors: list[dict] = []

    def on_record_error(err: RecordError) -> None:
        reason = err.reason.split(":", 1)[0]
        read_stats.rows_in += 1
        read_stats.dropped[reason] = read_stats.dropped.get(reason, 0) + 1
        log.warning("%s", err)
        if sum(1 for e in errors if e["kind"] == "record") < MAX_RECORD_ERRORS_KEPT:
            errors.append({"kind": "record", "input": spec.input.key, "where": err.where, "reason": err.reason})

    writer = ShardWriter(spec.shards_dir, spec.prefix, relative_dir=spec.shards_rel,
                         target_bytes=spec.target_bytes, row_group_rows=spec.row_group_rows)
    rejects_writer = None
    if spec.rejects_dir is not None:
        rejects_writer = ShardWriter(spec.rejects_dir, spec.rejects_prefix + spec.prefix, relative_dir="rejects",
                                     target_bytes=spec.target_bytes, row_group_rows=spec.row_group_rows)
    reader = make_reader(spec.reader_format, spec.reader_options)
    current = READ_STAGE
    try:
        try:
            for table in reader.read(spec.input, batch_rows=spec.batch_rows, on_record_error=on_record_error):
                _check_owner(spec)
                if spec.cast:
                    table = _apply_cast(table, spec.cast, spec)
                read_stats.rows_in += table.num_rows
                read_stats.rows_out += table.num_rows
                _report(spec, READ_STAGE, table.num_rows)
                for stage, stats in zip(spec.stages, stage_stats):
                    current = stage.name
                    result = stage(table)
                    stats.merge(result.stats)
                    _report(spec, stage.name, result.stats.rows_in)
                    if result.rejects is not None and rejects_writer is not None:
                        rejects_writer.write(_rejects_view(result.rejects))
                    table = result.table
                current = "write"
                writer.write(table)
                current = READ_STAGE
        except ShardError as exc:
            # A broken input file: keep what was read before the break, record it, go on.
            log.error("task %d: %s", spec.index, exc)
            errors.append({"kind": "shard", "input": spec.input.key, "reason": exc.reason,
                           "records_read": exc.records_read})
        _check_owner(spec)
        shards = writer.close()
        rejects = rejects_writer.close() if rejects_writer is not None else []
    except (RetryableError, FatalError, OwnerGone):
        writer.abort()
        if rejects_writer is not None:
            rejects_writer.abort()
        raise
    except OSError as exc:  # a full disk, a read-only root: one line, no temporary files left
        writer.abort()
        if rejects_writer is not None:
            rejects_writer.abort()
        raise FatalError(f"task {spec.index} (input {spec.input.key}) failed in {current}: {_one_line(exc)}") from None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # a bug or a fatal condition (a Rust panic too): stop the run, say where
        writer.abort()
        if rejects_writer is not None:
            rejects_writer.abort()
        raise FatalError(
            f"task {spec.index} (input {spec.input.key}) failed in {current}: {type(exc).__name__}: {exc}\n"
            + traceback.format_exc()
        ) from None  # the traceback is in the message; some causes (Rust panics) do not pickle
    result = TaskResult(
        index=spec.index, input_key=spec.input.key, shards=shards, rejects=rejects,
        stats=[read_stats, *stage_stats], errors=errors, seconds=time.perf_counter() - start,
    )
    _check_owner(spec)
    try:
        spec.marker.write_bytes_atomic(result.to_json().encode())
    except OSError as exc:
        raise FatalError(f"task {spec.index} (input {spec.input.key}): cannot write its marker: "
                         f"{_one_line(exc)}") from None
    return result


def _report(spec: TaskSpec, stage: str, rows: int) -> None:
    if spec.progress is not None and rows:
        try:
            spec.progress.put((stage, rows))
        except Exception:  # progress is best-effort; never fail a task over it
            pass
