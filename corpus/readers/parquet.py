"""Parquet files (including other cidermill versions' shards)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from manifests.errors import ShardError

from .base import InputFile, OnRecordError, Reader, stable_ids


@dataclass(frozen=True, kw_only=True)
class ParquetConfig:
    columns: list[str] | None = None  # read only these (id/source are added if absent)
    text_field: str = "text"  # renamed to `text` when different


class ParquetReader(Reader):
    format = "parquet"
    Config = ParquetConfig
    digest_while_reading = True  # footer and column chunks are read out of order: hashed by a second read

    def read(self, source: InputFile, *, batch_rows: int, on_record_error: OnRecordError) -> Iterator[pa.Table]:
        loc = source.location
        n_read = 0
        try:
            f = loc.fs.open_input_file(loc.path)
        except OSError as exc:
            raise ShardError(loc.uri, f"cannot open ({exc})") from exc
        with f:
            try:
                pf = pq.ParquetFile(f)
            except (pa.ArrowInvalid, OSError) as exc:
                raise ShardError(loc.uri, f"not a readable Parquet file, truncated or corrupt ({exc})") from exc
            try:
                for batch in pf.iter_batches(batch_size=batch_rows, columns=self.config.columns):
                    table = pa.Table.from_batches([batch])
                    yield self._normalise(table, source, n_read)
                    n_read += table.num_rows
            except (pa.ArrowInvalid, OSError) as exc:
                raise ShardError(loc.uri, f"corrupt data in row group ({exc})", records_read=n_read) from exc

    def _normalise(self, table: pa.Table, source: InputFile, start: int) -> pa.Table:
        tf = self.config.text_field
        if tf != "text" and tf in table.schema.names:
            table = table.rename_columns(["text" if n == tf else n for n in table.schema.names])
        if "id" not in table.schema.names:
            table = table.add_column(0, "id", stable_ids(source.key, start, table.num_rows))
        if "source" not in table.schema.names:
            rows = pa.array(range(start, start + table.num_rows), pa.int64())
            src = pc.binary_join_element_wise(f"{source.key}#", pc.cast(rows, pa.string()), "")
            table = table.add_column(1, "source", src)
        return table
