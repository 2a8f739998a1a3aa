"""JSON Lines, plain or compressed (.gz, .zst), one record per line."""

from __future__ import annotations

import io
import json
import zlib
from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa
import zstandard

from manifests.errors import RecordError, ShardError

from manifests.config import require
from .base import InputFile, OnRecordError, Reader, stable_id


@dataclass(frozen=True, kw_only=True)
class JsonlConfig:
    text_field: str = "text"
    id_field: str | None = None  # use the record's own id (must be unique) instead of file#line
    source_field: str | None = None  # e.g. "url"; default "<file>#L<line>"
    columns: list[str] = field(default_factory=list)  # fields lifted to string columns; the rest go to `meta`

    def __post_init__(self):
        require(bool(self.text_field), "text_field must be a non-empty field name")


def open_decompressed(loc, raw) -> io.BufferedIOBase:
    name = loc.path.lower()
    if name.endswith(".gz"):
        return StreamDecompressor(raw, lambda: zlib.decompressobj(wbits=31), "gzip")
    if name.endswith((".zst", ".zstd")):
        dctx = zstandard.ZstdDecompressor()
        return StreamDecompressor(raw, dctx.decompressobj, "zstd")
    return raw


class StreamDecompressor(io.RawIOBase):
    """Multi-member gzip / multi-frame zstd that hands out data as it decompresses and raises
    EOFError when the input ends inside a member, after everything before the cut was read.

    (gzip.GzipFile loses the partial block on truncation; zstandard's stream_reader returns a
    short read and no error, which would lose rows silently.)
    """

    def __init__(self, raw, new_decompressor, kind: str, chunk_bytes: int = 1 << 16):
        self._raw = raw
        self._chunk = chunk_bytes
        self._new = new_decompressor
        self._kind = kind
        self._d = new_decompressor()
        self._buf = b""
        self._in_frame = False

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self._buf:
            data = self._raw.read(self._chunk)
            if not data:
                if self._in_frame and not self._d.eof:
                    raise EOFError(f"{self._kind} stream ended before its end mark")
                return 0
            while data:
                self._in_frame = True
                self._buf += self._d.decompress(data)
                data = b""
                if self._d.eof:  # a member/frame ended; more may follow
                    data = self._d.unused_data
                    self._d = self._new()
                    self._in_frame = False
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


class JsonlReader(Reader):
    format = "jsonl"
    Config = JsonlConfig

    def read(self, source: InputFile, *, batch_rows: int, on_record_error: OnRecordError) -> Iterator[pa.Table]:
        cfg = self.config
        loc = source.location
        rows: dict[str, list] = {"id": [], "source": [], "text": [], "meta": [], **{c: [] for c in cfg.columns}}
        line_no = 0
        n_ok = 0
        try:
            with loc.fs.open_input_stream(loc.path, compression=None) as raw:
                stream = io.BufferedReader(open_decompressed(loc, raw), buffer_size=1 << 16)
                for line_no, line in enumerate(stream, start=1):
                    record = self._parse(line, loc.uri, line_no, on_record_error)
                    if record is None:
                        continue
                    self._append(rows, record, source, line_no)
                    n_ok += 1
                    if len(rows["id"]) >= batch_rows:
                        yield self._table(rows)
                        rows = {k: [] for k in rows}
        except (EOFError, OSError, zlib.error, zstandard.ZstdError) as exc:
            if rows["id"]:
                yield self._table(rows)
            raise ShardError(loc.uri, f"compressed stream is truncated or corrupt ({exc}) at line {line_no + 1}",
                             records_read=n_ok) from exc
        if rows["id"]:
            yield self._table(rows)

    def _parse(self, line: bytes, uri: str, line_no: int, on_error: OnRecordError) -> dict | None:
        if not line.strip():
            return None
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            on_error(RecordError(uri, f"line {line_no}", f"invalid_utf8: byte {exc.start} ({exc.reason})"))
            return None
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            on_error(RecordError(uri, f"line {line_no}", f"invalid_json: {exc.msg} at column {exc.colno}"))
            return None
        if not isinstance(record, dict):
            on_error(RecordError(uri, f"line {line_no}", "invalid_json: a line must hold a JSON object"))
            return None
        if not isinstance(record.get(self.config.text_field), str):
            on_error(RecordError(uri, f"line {line_no}", f"missing_text: no string field {self.config.text_field!r}"))
            return None
        return record

    def _append(self, rows: dict, record: dict, source: InputFile, line_no: int) -> None:
        cfg = self.config
        rows["text"].append(record.pop(cfg.text_field))
        rid = record.pop(cfg.id_field, None) if cfg.id_field else None
        rows["id"].append(str(rid) if rid is not None else stable_id(source.key, line_no))
        src = record.get(cfg.source_field) if cfg.source_field else None
        rows["source"].append(str(src) if src is not None else f"{source.key}#L{line_no}")
        for c in cfg.columns:
            v = record.pop(c, None)
            rows[c].append(None if v is None else (v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)))
        rows["meta"].append(json.dumps(record, ensure_ascii=False, sort_keys=True) if record else None)

    def _table(self, rows: dict) -> pa.Table:
        return pa.table({k: pa.array(v, pa.string()) for k, v in rows.items()})

