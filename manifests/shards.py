"""Writing Parquet shards: zstd, fixed row-group size, roll-over at a target byte size.

Row groups have a fixed number of rows however the rows arrive, so the same rows always give
the same bytes; that is what makes version ids reproducible across executors and batch sizes.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq

from .hashing import HashingSink
from .manifest import ShardInfo
from .storage import Location

DEFAULT_ROW_GROUP_ROWS = 4096
DEFAULT_TARGET_SHARD_BYTES = 256 << 20
_BUFFER_BYTES = 1 << 20


def write_options() -> dict:
    # Fixed options: every shard of every version is written the same way.
    return dict(compression="zstd", compression_level=3, use_dictionary=True, write_statistics=True)


class ShardWriter:
    """Writes a stream of tables into shards named `{prefix}-{k:03d}.parquet` under `directory`.

    A shard is written to a temporary name and renamed when closed; `close()` returns the
    ShardInfo list in order. A shard rolls over once it passes `target_bytes` (measured on
    the compressed file as row groups are flushed).
    """

    def __init__(
        self,
        directory: Location,
        prefix: str,
        *,
        relative_dir: str = "",
        target_bytes: int = DEFAULT_TARGET_SHARD_BYTES,
        row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
        hash_in_thread: bool = False,
    ):
        if target_bytes <= 0 or row_group_rows <= 0:
            raise ValueError(f"target_bytes and row_group_rows must be > 0; got {target_bytes}, {row_group_rows}")
        self.directory = directory
        self.prefix = prefix
        self.relative_dir = relative_dir
        self.target_bytes = target_bytes
        self.row_group_rows = row_group_rows
        self.hash_in_thread = hash_in_thread  # see HashingSink: worth it only with a core to spare
        self._schema: pa.Schema | None = None
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._pending_bytes = 0  # in memory, for sizing row groups against the shard target
        self._writer: pq.ParquetWriter | None = None
        self._sink: HashingSink | None = None
        self._stream: pa.NativeFile | None = None  # what the Parquet writer writes to: a buffer in front of _sink
        self._tmp: Location | None = None
        self._final: Location | None = None
        self._rows_in_shard = 0
        self._shards: list[ShardInfo] = []

    @property
    def schema(self) -> pa.Schema | None:
        return self._schema

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            if self._schema is None:
                self._schema = table.schema
            return
        if self._schema is None:
            self._schema = table.schema
        elif table.schema != self._schema:
            table = table.cast(self._schema)
        self._pending.append(table)
        self._pending_rows += table.num_rows
        self._pending_bytes += table.nbytes
        while self._pending_rows >= (n := self._group_rows()):
            self._flush_group(n)

    def _group_rows(self) -> int:
        """Rows per row group: `row_group_rows`, fewer where that many rows would pass the shard target in
        memory (a shard rolls over only between row groups, so a 64 KiB target with 4,096-row groups would
        otherwise give one big shard). The in-memory size bounds the compressed one from above."""
        per_row = max(1, self._pending_bytes // max(self._pending_rows, 1))
        return max(1, min(self.row_group_rows, self.target_bytes // per_row))

    def _flush_group(self, n_rows: int) -> None:
        first = self._pending[0]
        if first.num_rows >= n_rows and all(c.num_chunks == 1 for c in first.columns):
            # the group lies in one contiguous table: a slice of it, no copy (the same bytes written: one chunk
            # per column either way)
            group, rest = first.slice(0, n_rows), first.slice(n_rows)
            self._pending = ([rest] if rest.num_rows else []) + self._pending[1:]
        else:
            combined = pa.concat_tables(self._pending).combine_chunks()
            group, rest = combined.slice(0, n_rows), combined.slice(n_rows)
            self._pending = [rest] if rest.num_rows else []
        rest_rows = self._pending_rows - n_rows
        self._pending_bytes = self._pending_bytes * rest_rows // max(self._pending_rows, 1)
        self._pending_rows = rest_rows
        if self._writer is None:
            self._open()
        self._writer.write_table(group, row_group_size=n_rows)
        self._rows_in_shard += group.num_rows
        if self._stream.tell() >= self.target_bytes:
            self._close_shard()

    def _open(self) -> None:
        index = len(self._shards)
        name = f"{self.prefix}-{index:03d}.parquet"
        self._final = self.directory.join(name)
        self._tmp = self.directory.join(f"{name}.tmp-{os.getpid()}")
        self.directory.mkdir()
        # hashed as it is written (hashing.py): the closed shard is never read back to hash it. The writer hands
        # over ~200 pieces per MiB (page headers, pages); the buffer passes them on 1 MiB at a time, so the sink
        # (Python) and the file (a system call each) see a few dozen writes per shard. Same bytes either way.
        self._sink = HashingSink(self._tmp.fs.open_output_stream(self._tmp.path, compression=None),
                                 threaded=self.hash_in_thread)
        self._stream = pa.BufferedOutputStream(pa.PythonFile(self._sink, mode="w"), buffer_size=_BUFFER_BYTES)
        self._writer = pq.ParquetWriter(self._stream, self._schema, **write_options())
        self._rows_in_shard = 0

    def _close_shard(self) -> None:
        self._writer.close()
        self._stream.close()  # flushes the buffer into the sink
        self._sink.close()
        sha, n_bytes = self._sink.digest()
        self._tmp.move_to(self._final)
        rel = f"{self.relative_dir}/{self._final.name}" if self.relative_dir else self._final.name
        self._shards.append(ShardInfo(path=rel, rows=self._rows_in_shard, bytes=n_bytes, sha256=sha))
        self._writer = self._stream = self._sink = self._tmp = self._final = None

    def close(self) -> list[ShardInfo]:
        if self._pending_rows:
            self._flush_group(self._pending_rows)
        if self._writer is not None:
            self._close_shard()
        return list(self._shards)

    def abort(self) -> None:
        """Drop the shard in progress (used when a task fails mid-way)."""
        if self._tmp is not None:
            for close in (self._writer.close if self._writer else None, self._stream.close if self._stream else None,
                          self._sink.close if self._sink else None):
                try:
                    if close is not None:
                        close()
                except Exception:  # a full disk fails the flush again; the file goes anyway
                    pass
            try:
                self._tmp.delete()
            except OSError:
                pass
        self._writer = self._stream = self._sink = self._tmp = self._final = None
