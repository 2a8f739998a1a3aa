"""WARC files through FastWARC (resiliparse) at its native speed, with truncation detected.

FastWARC ends quietly at a clipped gzip member, handing out the last record short. So each record's
block is read whole and compared with its Content-Length: a short block means the file ends inside
it (the record is dropped as `truncated_record` and the file reported as a ShardError). Corrupt
deflate data raises in FastWARC itself. HTTP headers are parsed here from the block, which is what
makes the length check possible (FastWARC's own HTTP parsing hides the header size).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa
from fastwarc.warc import ArchiveIterator, WarcRecordType

from manifests.errors import RecordError, ShardError

from manifests.config import require
from .base import InputFile, OnRecordError, Reader

_TYPES = {"response": WarcRecordType.response, "resource": WarcRecordType.resource,
          "conversion": WarcRecordType.conversion, "request": WarcRecordType.request}
_MAX_HTTP_HEADER = 1 << 16

SCHEMA = pa.schema([
    ("id", pa.string()), ("source", pa.string()), ("url", pa.string()), ("warc_date", pa.string()),
    ("warc_type", pa.string()), ("http_status", pa.int32()), ("content_type", pa.string()),
    ("content", pa.binary()), ("warc_file", pa.string()), ("warc_offset", pa.int64()),
])


@dataclass(frozen=True, kw_only=True)
class WarcConfig:
    record_types: list[str] = field(default_factory=lambda: ["response"])
    max_payload_bytes: int = 8 << 20  # bigger payloads are dropped as `payload_too_large`, unread

    def __post_init__(self):
        for t in self.record_types:
            require(t in _TYPES, f"record_types: {t!r} is not one of {sorted(_TYPES)}")
        require(self.max_payload_bytes > 0, f"max_payload_bytes must be > 0; got {self.max_payload_bytes}")


def split_http(block: bytes) -> tuple[int | None, str | None, bytes]:
    """(status, content type, body) of an HTTP response block; (None, None, block) if it is not one."""
    if not block.startswith(b"HTTP/"):
        return None, None, block
    end = block.find(b"\r\n\r\n", 0, _MAX_HTTP_HEADER)
    sep = 4
    if end < 0:
        end, sep = block.find(b"\n\n", 0, _MAX_HTTP_HEADER), 2
        if end < 0:
            return None, None, block
    head = block[:end].decode("latin-1").splitlines()
    parts = head[0].split(None, 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    ctype = None
    for line in head[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-type":
            ctype = value.strip()
    return status, ctype, block[end + sep:]


class WarcReader(Reader):
    format = "warc"
    Config = WarcConfig

    def read(self, source: InputFile, *, batch_rows: int, on_record_error: OnRecordError) -> Iterator[pa.Table]:
        loc = source.location
        types = 0
        for t in self.config.record_types:
            types |= _TYPES[t]
        limit = self.config.max_payload_bytes + _MAX_HTTP_HEADER
        rows = _Columns()
        n_seen = 0
        truncated = None
        try:
            # A random-access file (FastWARC calls tell()); FastWARC detects and inflates gzip itself.
            with loc.fs.open_input_file(loc.path) as raw:
                for record in ArchiveIterator(raw, record_types=types, parse_http=False, strict_mode=False):
                    n_seen += 1
                    offset = record.stream_pos
                    rid = (record.record_id or "").strip("<>").removeprefix("urn:uuid:")
                    where = f"offset {offset} record {rid or '?'}"
                    if record.content_length > limit:
                        on_record_error(RecordError(loc.uri, where, f"payload_too_large: {record.content_length} "
                                                    f"bytes > {self.config.max_payload_bytes}"))
                        continue
                    block = record.reader.read()
                    if len(block) < record.content_length:
                        truncated = where
                        on_record_error(RecordError(loc.uri, where, "truncated_record: the file ends inside "
                                                    f"this record ({len(block)} of {record.content_length} bytes)"))
                        break
                    if not rid:
                        on_record_error(RecordError(loc.uri, where, "missing_record_id: no WARC-Record-ID header"))
                        continue
                    status, ctype, body = split_http(block)
                    url = (record.headers.get("WARC-Target-URI") or "").strip("<>")
                    rows.append(rid, url or f"{source.key}@{offset}", url or None, record.headers.get("WARC-Date"),
                                record.headers.get("WARC-Type"), status, ctype, body, source.key, offset)
                    if len(rows) >= batch_rows:
                        yield rows.table()
                        rows = _Columns()
        except OSError as exc:  # corrupt deflate data, unreadable file
            if len(rows):
                yield rows.table()
            raise ShardError(loc.uri, f"WARC stream is corrupt ({exc})", records_read=n_seen - 1) from exc
        if len(rows):
            yield rows.table()
        if truncated:
            raise ShardError(loc.uri, f"WARC file is truncated (ends inside {truncated})", records_read=n_seen - 1)


class _Columns:
    """Rows gathered column by column (cheaper than a list of dicts -> Table.from_pylist)."""

    def __init__(self):
        self.cols: list[list] = [[] for _ in SCHEMA]

    def append(self, *values) -> None:
        for col, v in zip(self.cols, values):
            col.append(v)

    def __len__(self) -> int:
        return len(self.cols[0])

    def table(self) -> pa.Table:
        return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(self.cols, SCHEMA)], schema=SCHEMA)
