"""Checks between the tasks and publishing: every output the tasks reported is there, one schema per
version, unique ids.

Both read only Parquet footers and the `id` column of the staged shards. Unique ids hold every
id of the version in memory (about 50 bytes an id); null ids are not checked.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from manifests.errors import FatalError
from manifests.manifest import ShardInfo, StageStats
from manifests.shards import ShardWriter
from manifests.storage import Location

from ..stage import DROP_REASON, DROP_STAGE
from .task import TaskResult, _rejects_view

UNIQUE_STAGE = "unique_ids"
DUPLICATE_ID = "duplicate_id"


def require_outputs(results: list[TaskResult], *, shards_dir: Location, rejects_dir: Location | None) -> None:
    """Every file the tasks say they wrote must be visible from here, at its size; else stop naming it.

    The driver knows a run's outputs only from the tasks' results (never from listing its own
    disk), so a task that ran on a machine which does not share the data root (a worker's own
    local disk) is found here, before anything is published, instead of giving a smaller version.
    """
    expected = [(r, shards_dir, s) for r in results for s in r.shards]
    expected += [(r, rejects_dir, s) for r in results for s in r.rejects] if rejects_dir is not None else []
    listed: dict[str, dict[str, int]] = {}
    missing = []
    for r, directory, info in expected:
        if directory.path not in listed:
            listed[directory.path] = directory.file_sizes()
        name = info.path.rsplit("/", 1)[-1]
        size = listed[directory.path].get(name)
        if size != info.bytes:
            missing.append((r, directory.join(name), info, size))
    if missing:
        r, loc, info, size = missing[0]
        state = "is missing" if size is None else f"has {size} bytes"
        more = f" ({len(missing)} files in all)" if len(missing) > 1 else ""
        raise FatalError(
            f"task {r.index} (input {r.input_key}) wrote {info.path} ({info.bytes} bytes), but {loc.uri} {state} "
            f"as this machine sees the data root{more}; every machine of a run must see the same data root: use "
            "an object store (output.root: s3://bucket/path) or a filesystem mounted at the same path on every node")


def _schema(loc: Location) -> pa.Schema:
    with loc.fs.open_input_file(loc.path) as f:
        return pq.read_schema(f)


def output_schema(staging: Location, results: list[TaskResult]) -> pa.Schema | None:
    """The one schema of the staged shards; refuse a mix, naming the input and the column."""
    first: tuple[str, pa.Schema] | None = None
    for r in results:
        for s in r.shards:
            schema = _schema(staging.join(s.path))
            if first is None:
                first = (r.input_key, schema)
                continue
            key0, ref = first
            if schema.equals(ref, check_metadata=False):
                continue
            for fld in ref:
                other = schema.field(fld.name).type if fld.name in schema.names else None
                if other != fld.type:
                    got = "missing" if other is None else str(other)
                    raise FatalError(
                        f"output of input {r.input_key}: column {fld.name!r} is {got}, but the output of {key0} has "
                        f"{fld.type}; one version needs one schema: add `input: {{cast: {{{fld.name}: {fld.type}}}}}` "
                        "or fix the input")
            raise FatalError(f"output of input {r.input_key}: columns {schema.names} differ from those of "
                             f"{key0} {ref.names}; one version needs one schema")
    return None if first is None else first[1]


def _ids(staging: Location, results: list[TaskResult]) -> tuple[pa.ChunkedArray, list[int]] | None:
    """The `id` column of every staged shard in version order, and where each task's rows start."""
    chunks, starts, n = [], [], 0
    for r in results:
        starts.append(n)
        for s in r.shards:
            loc = staging.join(s.path)
            with loc.fs.open_input_file(loc.path) as f:
                pf = pq.ParquetFile(f)
                if "id" not in pf.schema_arrow.names:
                    return None
                col = pf.read(columns=["id"]).column("id")
            chunks.extend(col.chunks)
            n += len(col)
    if not chunks:
        return None
    return pa.chunked_array(chunks), starts


def has_duplicates(ids: pa.ChunkedArray | pa.Array) -> bool:
    """Whether a non-null id occurs twice. polars hashes the ids once (~5x less CPU than the group-by that
    finds and reports them, which now runs only when there is something to report); nulls are not ids."""
    import polars as pl

    series = pl.from_arrow(ids).drop_nulls()
    return series.n_unique() != len(series)


def enforce_unique_ids(staging: Location, results: list[TaskResult], *, mode: str, rejects: bool,
                       target_bytes: int, row_group_rows: int) -> tuple[list[TaskResult], list[ShardInfo], StageStats | None]:
    """`error`: refuse duplicate ids naming them and their inputs. `drop`: keep each id's first row
    (in version order), rewrite the shards of tasks that lost rows, and return the dropped rows as
    rejects with reason `duplicate_id`. `off`: do nothing."""
    if mode == "off":
        return results, [], None
    found = _ids(staging, results)
    stats = StageStats(UNIQUE_STAGE) if mode == "drop" else None
    if found is None:
        return results, [], stats
    ids, starts = found
    total = len(ids)
    if not has_duplicates(ids):  # the usual case, decided in one hash pass
        if stats is not None:
            stats.rows_in = stats.rows_out = total
        return results, [], stats
    table = pa.table({"id": ids, "pos": pa.array(range(total), pa.int64())}).filter(pc.is_valid(ids))
    groups = table.group_by("id").aggregate([("pos", "min"), ("pos", "count")])
    dup = groups.filter(pc.greater(groups.column("pos_count"), 1))
    if stats is not None:
        stats.rows_in = stats.rows_out = total
    if dup.num_rows == 0:
        return results, [], stats
    if mode == "error":
        def input_of(pos: int) -> str:
            k = max(i for i, start in enumerate(starts) if start <= pos)
            return results[k].input_key

        examples = []
        dup_ids = set(dup.column("id").slice(0, 3).to_pylist())
        rows = table.filter(pc.is_in(table.column("id"), pa.array(list(dup_ids), ids.type)))
        for rid in sorted(dup_ids, key=str):
            where = sorted({input_of(p) for i, p in zip(rows.column("id").to_pylist(), rows.column("pos").to_pylist())
                            if i == rid})
            examples.append(f"{rid!r} in {', '.join(where)}")
        n_extra = int(pc.sum(dup.column("pos_count")).as_py()) - dup.num_rows
        raise FatalError(
            f"{dup.num_rows} ids occur more than once ({n_extra} extra rows), e.g. {'; '.join(examples)}; "
            "ids must be unique in a version: fix the inputs, or set `output: {unique_ids: drop}` to keep "
            "each id's first row (the others go to the rejects with reason duplicate_id)")
    keep_pos = groups.column("pos_min")
    keep = pc.or_(pc.is_in(pa.array(range(total), pa.int64()), value_set=keep_pos), pc.is_null(ids))
    keep = keep.combine_chunks() if isinstance(keep, pa.ChunkedArray) else keep
    reject_shards: list[ShardInfo] = []
    rejects_writer = ShardWriter(staging.join("rejects"), f"{UNIQUE_STAGE}-part", relative_dir="rejects",
                                 target_bytes=target_bytes, row_group_rows=row_group_rows) if rejects else None
    try:
        out = _rewrite(staging, results, keep, starts, rejects_writer, stats, target_bytes, row_group_rows)
        if rejects_writer is not None:
            reject_shards = rejects_writer.close()
    except BaseException:
        if rejects_writer is not None:
            rejects_writer.abort()
        raise
    stats.rows_out = total - stats.n_dropped
    return out, reject_shards, stats


def _rewrite(staging, results, keep, starts, rejects_writer, stats, target_bytes, row_group_rows):
    out = []
    for k, r in enumerate(results):
        n_rows = sum(s.rows for s in r.shards)
        mask = keep.slice(starts[k], n_rows)
        if n_rows == 0 or pc.all(mask).as_py():
            out.append(r)
            continue
        writer = ShardWriter(staging.join("shards"), f"part-{r.index:05d}u", relative_dir="shards",
                             target_bytes=target_bytes, row_group_rows=row_group_rows)
        try:
            _filter_task(staging, r, mask, writer, rejects_writer)
        except BaseException:
            writer.abort()
            raise
        n_drop = n_rows - int(pc.sum(mask).as_py() or 0)
        stats.dropped[DUPLICATE_ID] = stats.dropped.get(DUPLICATE_ID, 0) + n_drop
        out.append(dataclasses.replace(r, shards=writer.close()))
    return out


def _filter_task(staging, r, mask, writer, rejects_writer) -> None:
    offset = 0
    for s in r.shards:
        loc = staging.join(s.path)
        with loc.fs.open_input_file(loc.path) as f:
            t = pq.read_table(f)
        m = mask.slice(offset, t.num_rows)
        offset += t.num_rows
        writer.write(t.filter(m))
        if rejects_writer is not None:
            dropped = t.filter(pc.invert(m))
            dropped = dropped.append_column(DROP_STAGE, pa.array([UNIQUE_STAGE] * dropped.num_rows, pa.string()))
            dropped = dropped.append_column(DROP_REASON, pa.array([DUPLICATE_ID] * dropped.num_rows, pa.string()))
            rejects_writer.write(_rejects_view(dropped))
