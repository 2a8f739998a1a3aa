"""WARC files through FastWARC (resiliparse), with truncation detected instead of ignored.

FastWARC stops quietly at a clipped gzip member; here gzip is decompressed by Python's zlib,
which raises on truncation, and the records before the cut are salvaged with a second pass.
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa
from fastwarc.warc import ArchiveIterator, WarcRecordType

from manifests.errors import RecordError, ShardError

from ..config import require
from .base import InputFile, OnRecordError, Reader

_TYPES = {"response": WarcRecordType.response, "resource": WarcRecordType.resource,
          "conversion": WarcRecordType.conversion, "request": WarcRecordType.request}

SCHEMA = pa.schema([
    ("id", pa.string()), ("source", pa.string()), ("url", pa.string()), ("warc_date", pa.string()),
    ("warc_type", pa.string()), ("http_status", pa.int32()), ("content_type", pa.string()),
    ("content", pa.binary()), ("warc_file", pa.string()), ("warc_offset", pa.int64()),
])


@dataclass(frozen=True, kw_only=True)
class WarcConfig:
    record_types: list[str] = field(default_factory=lambda: ["response"])
    max_payload_bytes: int = 8 << 20  # bigger payloads are dropped as `payload_too_large`

    def __post_init__(self):
        for t in self.record_types:
            require(t in _TYPES, f"record_types: {t!r} is not one of {sorted(_TYPES)}")
        require(self.max_payload_bytes > 0, f"max_payload_bytes must be > 0; got {self.max_payload_bytes}")


class WarcReader(Reader):
    format = "warc"
    Config = WarcConfig

    def read(self, source: InputFile, *, batch_rows: int, on_record_error: OnRecordError) -> Iterator[pa.Table]:
        loc = source.location
        n_seen = 0
        rows: list[dict] = []
        try:
            # A random-access file (FastWARC calls tell()); compression handled here, not by pyarrow.
            with loc.fs.open_input_file(loc.path) as raw:
                stream = gzip.GzipFile(fileobj=raw) if loc.path.endswith(".gz") else raw
                for row, error in self._records(stream, source):
                    n_seen += 1
                    if error is not None:
                        on_record_error(error)
                    else:
                        rows.append(row)
                    if len(rows) >= batch_rows:
                        yield pa.Table.from_pylist(rows, SCHEMA)
                        rows = []
        except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
            # Salvage the records before the cut with FastWARC's own (lenient) reader. The last
            # one it returns is the one the cut went through: drop it rather than emit half a page.
            with loc.fs.open_input_file(loc.path) as raw:
                salvaged = list(self._records(raw, source))[n_seen:]
            if salvaged:
                last, _ = salvaged.pop()
                if last is not None:
                    on_record_error(RecordError(loc.uri, f"offset {last['warc_offset']} record {last['id']}",
                                                "truncated_record: the file ends inside this record"))
                for row, error in salvaged:
                    if error is not None:
                        on_record_error(error)
                    else:
                        rows.append(row)
                n_seen += len(salvaged) + 1
            if rows:
                yield pa.Table.from_pylist(rows, SCHEMA)
            raise ShardError(loc.uri, f"WARC stream is truncated or corrupt ({exc})", records_read=n_seen) from exc
        if rows:
            yield pa.Table.from_pylist(rows, SCHEMA)

    def _records(self, stream, source: InputFile) -> Iterator[tuple[dict | None, RecordError | None]]:
        types = 0
        for t in self.config.record_types:
            types |= _TYPES[t]
        for record in ArchiveIterator(stream, record_types=types, parse_http=True, strict_mode=False):
            offset = record.stream_pos
            rid = (record.record_id or "").strip("<>").removeprefix("urn:uuid:")
            where = f"offset {offset} record {rid or '?'}"
            body = record.reader.read(self.config.max_payload_bytes + 1)
            if len(body) > self.config.max_payload_bytes:
                yield None, RecordError(source.location.uri, where,
                                        f"payload_too_large: > {self.config.max_payload_bytes} bytes")
                continue
            if not rid:
                yield None, RecordError(source.location.uri, where, "missing_record_id: no WARC-Record-ID header")
                continue
            url = (record.headers.get("WARC-Target-URI") or "").strip("<>")
            http = record.http_headers
            date = record.headers.get("WARC-Date")
            yield {
                "id": rid, "source": url or f"{source.key}@{offset}", "url": url or None,
                "warc_date": date, "warc_type": record.headers.get("WARC-Type"),
                "http_status": http.status_code if http is not None else None,
                "content_type": http.get("Content-Type") if http is not None else None,
                "content": body, "warc_file": source.key, "warc_offset": offset,
            }, None

