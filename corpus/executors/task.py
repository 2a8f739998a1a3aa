"""One task: one input file through a list of stages into one output shard (or a few, past the
target size). Executors differ only in where `run_task` runs.

Crash safety: shards are renamed into place when complete and the task's completion marker is
written after them, atomically. A task without a marker is redone from scratch after deleting
whatever it left; a task with one is skipped. A marker that does not parse, names another task,
or whose shards are missing or changed is deleted and the task redone, so a rerun always
recovers. So a killed run resumes without losing or duplicating rows.

A marker also records the sha256 of the input bytes the task read and the `context` it ran in
(the inputs of the pass's global stage), and is reused only when the input hashes the same now
and the context is the same: an input edited between a kill and the rerun, even to the same
size, is read again. An input that is a shard of a catalog version must hash to what its
manifest says (and hold the rows it says): a replaced or damaged shard stops the run.

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
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from manifests.errors import FatalError, RecordError, RetryableError, ShardError
from manifests.hashing import in_background
from manifests.manifest import ShardInfo, StageStats
from manifests.shards import ShardWriter
from manifests.storage import Location

from ..readers import InputFile, make_reader
from ..readers.base import InputDigest, location_digest
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
    max_retries: int = 0  # RetryableError: redo the task from scratch this many times (any executor, Ray too)
    context: str = ""  # what else the output depends on: a hash of the pass's global-stage inputs, or ""
    # cores are free beside this task (one local worker on a bigger machine): hash the input and the shards in
    # threads beside the decoding and encoding (manifests/hashing.py); the same hashes either way
    spare_cores: bool = False
    # tasks run one after another in this process (one local worker): the marker is written (its bytes and the
    # directory fsynced, which on most file systems waits for the task's shards to reach the disk too) in a
    # helper thread while the next task runs; the executor waits for every one (`marker_written`) before the
    # pass's results are used. A crash before a marker is on disk re-runs that task, as before.
    defer_marker: bool = False
    marker_written: Any = None  # set when `defer_marker`: waits for the marker's write, re-raising its error
    # the task runs in a local pool's worker: it returns its result without writing the marker, and the run
    # writes it in a helper thread as the result arrives (`defer_marker_write`), so the worker goes straight on
    # to its next task instead of waiting for its shards to reach the disk. As above, a crash before a marker
    # is on disk re-runs that task; the run waits for every marker before the pass's results are used.
    marker_by_caller: bool = False

    @property
    def prefix(self) -> str:
        return f"part-{self.index:05d}"


def marker_json(outcome: Any) -> str:
    """A task outcome (a dataclass) as its marker's JSON, without `resumed` (a fact of this run, not the task)."""
    d = asdict(outcome)
    d.pop("resumed", None)
    return json.dumps(d, sort_keys=True)


@dataclass
class TaskResult:
    index: int
    input_key: str
    shards: list[ShardInfo]
    rejects: list[ShardInfo]
    stats: list[StageStats]
    errors: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    input_sha256: str = ""  # the bytes the task read
    context: str = ""
    resumed: bool = False

    def to_json(self) -> str:
        return marker_json(self)

    @classmethod
    def from_json(cls, text: str | bytes) -> "TaskResult":
        d = json.loads(text)
        return cls(
            index=d["index"], input_key=d["input_key"],
            shards=[ShardInfo(**s) for s in d["shards"]], rejects=[ShardInfo(**s) for s in d["rejects"]],
            stats=[StageStats.from_dict(s) for s in d["stats"]], errors=d["errors"], seconds=d["seconds"],
            input_sha256=d.get("input_sha256", ""), context=d.get("context", ""), resumed=True,
        )


def read_marker(marker: Location, *, files: Callable[[dict], list[tuple[Location, int]]],
                what: str) -> dict | None:
    """The one marker check (pipeline tasks and tokenize tasks alike): the payload of a completion marker
    that parses, passes `files(payload)` (raise ValueError/KeyError/TypeError for "not this task's") and
    whose files all exist with their recorded sizes. Otherwise the marker is deleted and None returned,
    so the task is redone from scratch."""
    if not marker.exists():
        return None
    try:
        payload = json.loads(marker.read_bytes())
        expected = files(payload)
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("%s: not reusing its marker %s (%s); redoing the task", what, marker.uri, exc)
        marker.delete()
        return None
    for loc, size in expected:
        if not loc.exists() or loc.size() != size:
            log.warning("%s: marker present but %s is missing or changed; redoing", what, loc.uri)
            marker.delete()
            return None
    return payload


def write_marker(marker: Location, payload_json: str, *, what: str) -> None:
    """Written last and atomically, after every file the task made is in place."""
    try:
        marker.write_bytes_atomic(payload_json.encode())
    except OSError as exc:
        raise FatalError(f"{what}: cannot write its marker: {_one_line(exc)}") from None


def _completed(spec: TaskSpec) -> TaskResult | None:
    def files(d: dict) -> list[tuple[Location, int]]:
        result = TaskResult.from_json(json.dumps(d))
        if result.index != spec.index or result.input_key != spec.input.key:
            raise ValueError(f"marker is for task {result.index} ({result.input_key})")
        if result.context != spec.context:
            raise ValueError("the pass's global stage was built from other inputs since")
        if not result.input_sha256 or result.input_sha256 != _current_input_sha256(spec):
            raise ValueError(f"input {spec.input.key} is not the bytes the task read (edited since, or a marker "
                             "from before input hashes)")
        return [(base.join(info.path.rsplit("/", 1)[-1]), info.bytes)
                for info, base in [(s, spec.shards_dir) for s in result.shards] +
                [(s, spec.rejects_dir) for s in result.rejects]]

    payload = read_marker(spec.marker, files=files, what=f"task {spec.index}")
    return None if payload is None else TaskResult.from_json(json.dumps(payload))


def _current_input_sha256(spec: TaskSpec) -> str:
    """The input's sha256 now: this run's own staged shards are taken at their recorded hash (written and
    hashed by this run, checked by size); anything else is read and hashed."""
    if spec.input.sha256 and not spec.input.verify:
        return spec.input.sha256
    return location_digest(spec.input.location).sha256


def _check_input(spec: TaskSpec, digest: InputDigest, rows: int) -> None:
    """A shard of a catalog version must be the bytes (and hold the rows) its manifest promises."""
    f = spec.input
    ref = f.version_ref
    what = f"input {f.location.uri}" + (f" (a shard of {ref})" if ref else "")
    fix = f"; run `cidermill data verify {ref}`" if ref else ""
    if f.sha256 and digest.sha256 != f.sha256:
        raise FatalError(f"{what}: sha256 {digest.sha256[:12]} does not match the manifest's {f.sha256[:12]}; the "
                         f"shard was replaced or damaged after publishing, so nothing read from it is used{fix}")
    if f.rows is not None and rows != f.rows:
        raise FatalError(f"{what}: holds {rows} rows, the manifest says {f.rows}{fix}")


def _clear_leftovers(spec: TaskSpec) -> None:
    for directory, prefix in ((spec.shards_dir, spec.prefix), (spec.rejects_dir, spec.rejects_prefix + spec.prefix)):
        if directory is None:
            continue
        for loc in directory.listdir():
            if loc.name.startswith(prefix + "-") or loc.name.startswith(prefix + "."):
                loc.delete()


def _rejects_view(rejects: pa.Table) -> pa.Table:
    """The dropped rows in the rejects schema. `id`, `source` and `text` of another type (an int64 id,
    polars' large_string text, a struct) are converted to strings rather than lost: a reject without its
    id or text cannot be audited."""
    cols = {}
    for f in REJECTS_SCHEMA:
        if f.name in rejects.schema.names:
            cols[f.name] = _as_strings(rejects.column(f.name))
        else:
            cols[f.name] = pa.nulls(rejects.num_rows, f.type)
    return pa.table(cols, schema=REJECTS_SCHEMA)


def _as_strings(column: pa.ChunkedArray) -> pa.ChunkedArray | pa.Array:
    if column.type == pa.string():
        return column
    try:
        return pc.cast(column, pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        # nested or binary values: JSON, as the JSONL reader keeps non-string fields
        return pa.array([None if v is None else v.decode("utf-8", "replace") if isinstance(v, bytes)
                         else json.dumps(v, ensure_ascii=False, default=str) for v in column.to_pylist()], pa.string())


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


def apply_stages(table: pa.Table, stages: list[Stage], stats: list[StageStats], *,
                 on_start: Callable[[str], None] | None = None,
                 on_done: Callable[[str, Any], None] | None = None,
                 on_rejects: Callable[[pa.Table], None] | None = None) -> pa.Table:
    """The one place a batch goes through stages in order: each stage's stats merge into `stats` (one per
    stage), its rejects go to `on_rejects`. Pipeline tasks and the synth runner both call this."""
    for stage, st in zip(stages, stats):
        if on_start is not None:
            on_start(stage.name)
        result = stage(table)
        st.merge(result.stats)
        if on_done is not None:
            on_done(stage.name, result)
        if result.rejects is not None and on_rejects is not None:
            on_rejects(result.rejects)
        table = result.table
    return table


def with_retries(fn: Callable[[], Any], *, retries: int, what: str) -> Any:
    """The one retry loop: a RetryableError is retried `retries` times, then raised. It runs inside the
    task, wherever the executor put it (a local worker, a Ray task), so every executor retries alike."""
    for attempt in range(retries + 1):
        try:
            return fn()
        except RetryableError as exc:
            if attempt == retries:
                raise
            log.warning("%s: %s; retrying (%d of %d)", what, exc, attempt + 1, retries)
    raise AssertionError("unreachable")


def run_task(spec: TaskSpec) -> TaskResult:
    """Run one task, retrying a RetryableError `spec.max_retries` times (each try starts clean)."""
    return with_retries(lambda: _run_task_once(spec), retries=spec.max_retries, what=f"task {spec.index}")


def _run_task_once(spec: TaskSpec) -> TaskResult:
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
                         target_bytes=spec.target_bytes, row_group_rows=spec.row_group_rows,
                         hash_in_thread=spec.spare_cores)
    rejects_writer = None
    if spec.rejects_dir is not None:
        rejects_writer = ShardWriter(spec.rejects_dir, spec.rejects_prefix + spec.prefix, relative_dir="rejects",
                                     target_bytes=spec.target_bytes, row_group_rows=spec.row_group_rows,
                                     hash_in_thread=spec.spare_cores)
    reader = make_reader(spec.reader_format, spec.reader_options)
    current = READ_STAGE
    try:
        needs_digest = not (spec.input.sha256 and not spec.input.verify)  # see below
        # a local input only: on an object store the overlap is a second GET open beside the read, which
        # a slow endpoint can stall past the client's low-speed limit (seen with moto under load)
        reader.begin(spec.input, digest_in_background=needs_digest and spec.spare_cores
                     and spec.input.location.is_local)
        try:
            for table in reader.read(spec.input, batch_rows=spec.batch_rows, on_record_error=on_record_error):
                _check_owner(spec)
                if spec.cast:
                    table = _apply_cast(table, spec.cast, spec)
                read_stats.rows_in += table.num_rows
                read_stats.rows_out += table.num_rows
                read_stats.bytes_out += table.nbytes
                _report(spec, READ_STAGE, table.num_rows)
                def entering(name: str) -> None:
                    nonlocal current
                    current = name

                table = apply_stages(
                    table, spec.stages, stage_stats, on_start=entering,
                    on_done=lambda name, result: _report(spec, name, result.stats.rows_in),
                    on_rejects=(lambda r: rejects_writer.write(_rejects_view(r))) if rejects_writer is not None else None)
                current = "write"
                writer.write(table)
                current = READ_STAGE
        except ShardError as exc:
            # A broken input file: keep what was read before the break, record it, go on.
            shard_error = exc
            errors.append({"kind": "shard", "input": spec.input.key, "reason": exc.reason,
                           "records_read": exc.records_read})
        else:
            shard_error = None
        current = "read"
        if not needs_digest:
            digest = InputDigest(spec.input.sha256, 0)  # this run's own staged shard (see _current_input_sha256)
        else:
            digest = reader.input_digest(spec.input)
            _check_input(spec, digest, read_stats.rows_in)  # a damaged version shard is that, not a shard error
        if shard_error is not None:
            log.error("task %d: %s", spec.index, shard_error)
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
        where = _save_traceback(spec)
        raise FatalError(
            f"task {spec.index} (input {spec.input.key}) failed in {current}: {type(exc).__name__}: {_one_line(exc)}"
            + (f" (traceback: {where})" if where else "")
        ) from None  # one line; the traceback is in a file (some causes, Rust panics, do not pickle)
    result = TaskResult(
        index=spec.index, input_key=spec.input.key, shards=shards, rejects=rejects,
        stats=[read_stats, *stage_stats], errors=errors, seconds=time.perf_counter() - start,
        input_sha256=digest.sha256, context=spec.context,
    )
    _check_owner(spec)
    if spec.marker_by_caller:
        return result
    if spec.defer_marker:
        defer_marker_write(spec, result)
    else:
        write_marker(spec.marker, result.to_json(), what=_marker_what(spec))
    return result


def _marker_what(spec: TaskSpec) -> str:
    return f"task {spec.index} (input {spec.input.key})"


def defer_marker_write(spec: TaskSpec, result: TaskResult) -> None:
    """Write `result`'s marker in a helper thread; `spec.marker_written()` waits for it, re-raising its error."""
    payload, what = result.to_json(), _marker_what(spec)
    spec.marker_written = in_background(lambda: write_marker(spec.marker, payload, what=what), name="marker")


def _save_traceback(spec: TaskSpec) -> str | None:
    """The current exception's traceback, beside the task's marker (`00003.traceback`); its URI, or None."""
    loc = Location(spec.marker.fs, spec.marker.path.rsplit(".", 1)[0] + ".traceback")
    try:
        loc.write_bytes_atomic(traceback.format_exc().encode())
    except OSError:
        return None
    return loc.uri


def _report(spec: TaskSpec, stage: str, rows: int) -> None:
    if spec.progress is not None and rows:
        try:
            spec.progress.put((stage, rows))
        except Exception:  # progress is best-effort; never fail a task over it
            pass
