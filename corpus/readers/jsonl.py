"""JSON Lines, plain or compressed (.gz, .zst), one record per line.

Hostile input ends in a record error or a shard error, never in a traceback or a lost good row:
a line over `max_record_bytes` is skipped without being held in memory (`record_too_large`); a
string with a lone UTF-16 surrogate escape (`"\\ud83d"`, which Python's json accepts and UTF-8
cannot hold) is `invalid_unicode`; absurd nesting or numbers are `invalid_json`. Bytes after the
last complete gzip member or zstd frame are reported after every line before them was read (zero
padding is skipped, as gzip does).
"""

from __future__ import annotations

import io
import json
import re
import zlib
from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa
import zstandard

from manifests.config import Size, require
from manifests.errors import RecordError, ShardError

from .base import InputFile, OnRecordError, Reader, stable_id


@dataclass(frozen=True, kw_only=True)
class JsonlConfig:
    text_field: str = "text"
    id_field: str | None = None  # use the record's own id (must be unique) instead of file#line
    source_field: str | None = None  # e.g. "url"; default "<file>#L<line>"
    columns: list[str] = field(default_factory=list)  # fields lifted to string columns; the rest go to `meta`
    max_record_bytes: Size = 64 << 20  # longer lines are dropped as `record_too_large`, never held whole

    def __post_init__(self):
        require(bool(self.text_field), "text_field must be a non-empty field name")
        require(self.max_record_bytes > 0, f"max_record_bytes must be > 0; got {self.max_record_bytes}")


def open_decompressed(loc, raw) -> io.RawIOBase:
    name = loc.path.lower()
    if name.endswith(".gz"):
        return StreamDecompressor(raw, "gzip")
    if name.endswith((".zst", ".zstd")):
        return StreamDecompressor(raw, "zstd")
    return raw


_MAX_OUT = 4 << 20  # decompressed bytes produced per step: a small file that inflates to gigabytes is never whole
_MAGIC = {"gzip": (b"\x1f\x8b",), "zstd": (b"\x28\xb5\x2f\xfd",)}


def _starts_member(kind: str, data: bytes) -> bool:
    if any(data.startswith(m) for m in _MAGIC[kind]):
        return True
    # zstd skippable frames: magic 0x184D2A5? (little endian)
    return kind == "zstd" and len(data) >= 4 and data[1:4] == b"\x2a\x4d\x18" and 0x50 <= data[0] <= 0x5F


class StreamDecompressor(io.RawIOBase):
    """Multi-member gzip / multi-frame zstd that hands out data as it decompresses.

    - The input ending inside a member raises EOFError, and corrupt data raises zlib/zstd's error, in
      both cases only after everything decompressed before it was handed out (gzip.GzipFile loses the
      partial block on truncation; zstandard's stream_reader returns a short read and no error).
    - After a complete member, zero bytes are padding and skipped; any other bytes that do not start a
      member end the stream, and `trailing` says where they start and how many there are.
    - Each step produces at most `_MAX_OUT` bytes (zlib's max_length; zstd is fed in slices sized by
      the ratio seen so far), so memory stays bounded whatever the compression ratio.
    """

    def __init__(self, raw, kind: str, chunk_bytes: int = 1 << 16):
        self._raw = raw
        self.kind = kind
        self._chunk = chunk_bytes
        self._d = None  # the decompressor of the member in progress; None between members
        self._pending = b""  # raw bytes read but not yet decompressed
        self._raw_done = False
        self._raw_read = 0
        self._out = b""
        self._out_pos = 0
        self._error: BaseException | None = None
        self._eof = False
        self._zstd_slice = 1024
        self._zstd_ratio = 1.0
        self.trailing: tuple[int, int] | None = None  # (offset, bytes) of data after the last member

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while self._out_pos >= len(self._out):
            if self._error is not None:
                raise self._error
            if self._eof:
                return 0
            self._out, self._out_pos = self._step(), 0
        n = min(len(b), len(self._out) - self._out_pos)
        b[:n] = self._out[self._out_pos:self._out_pos + n]
        self._out_pos += n
        return n

    def _read_raw(self) -> bool:
        data = self._raw.read(self._chunk) if not self._raw_done else b""
        if not data:
            self._raw_done = True
            return False
        self._raw_read += len(data)
        self._pending += data
        return True

    def _step(self) -> bytes:
        """Some decompressed bytes, or b"" with `_eof` or `_error` set (or a member just ended)."""
        if self._d is None:
            return self._start_member()
        if not self._pending and not self._read_raw():
            self._error = EOFError(f"{self.kind} stream ended inside a member (truncated) at byte {self._raw_read}")
            return b""
        try:
            if self.kind == "gzip":
                out = self._d.decompress(self._pending, _MAX_OUT)
                rest = self._d.unused_data if self._d.eof else self._d.unconsumed_tail
            else:
                take = self._pending[:self._zstd_slice]
                out = self._d.decompress(take)
                rest = (self._d.unused_data if self._d.eof else b"") + self._pending[len(take):]
                if take:  # size the next slice so that even this ratio yields at most _MAX_OUT
                    self._zstd_ratio = max(self._zstd_ratio, len(out) / len(take))
                    self._zstd_slice = int(min(1 << 20, max(256, _MAX_OUT / self._zstd_ratio)))
        except (zlib.error, zstandard.ZstdError) as exc:
            offset = self._raw_read - len(self._pending)
            self._error = type(exc)(f"{self.kind} data is corrupt near byte {offset} ({exc})")
            return b""
        self._pending = rest
        if self._d.eof:
            self._d = None  # a member/frame ended; another, padding or trailing bytes may follow
        return out

    def _start_member(self) -> bytes:
        while True:
            while len(self._pending) < 4 and self._read_raw():
                pass
            stripped = self._pending.lstrip(b"\0")  # zero padding after a member, as gzip allows
            if stripped or self._raw_done:
                self._pending = stripped
                break
            self._pending = b""
        if not self._pending:
            self._eof = True
            return b""
        if _starts_member(self.kind, self._pending):
            self._d = zlib.decompressobj(wbits=31) if self.kind == "gzip" else \
                zstandard.ZstdDecompressor().decompressobj()
            return b""
        offset = self._raw_read - len(self._pending)
        n = len(self._pending)
        while self._read_raw():  # count (and let the caller's hash see) the rest
            n += len(self._pending)
            self._pending = b""
        self._pending = b""
        self.trailing = (offset, n)
        self._eof = True
        return b""


# A JSON escape of a UTF-16 surrogate: paired ones decode to one code point, a lone one cannot be UTF-8.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _lone_surrogate(value, path: str = "") -> str | None:
    """The field path of the first string (or key) holding a lone surrogate, or None."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"{path or 'record'} (\\u{ord(value[exc.start]):04x} at character {exc.start})"
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            found = _lone_surrogate(k, f"{path}.<key>" if path else "<key>") or \
                _lone_surrogate(v, f"{path}.{k}" if path else str(k))
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _lone_surrogate(v, f"{path}[{i}]")
            if found:
                return found
    return None


class JsonlReader(Reader):
    format = "jsonl"
    Config = JsonlConfig

    def read(self, source: InputFile, *, batch_rows: int, on_record_error: OnRecordError) -> Iterator[pa.Table]:
        cfg = self.config
        loc = source.location
        limit = cfg.max_record_bytes
        rows: dict[str, list] = {"id": [], "source": [], "text": [], "meta": [], **{c: [] for c in cfg.columns}}
        line_no = 0
        n_ok = 0
        decompressed = None
        try:
            raw = self.open_stream(source)
            decompressed = open_decompressed(loc, raw)
            stream = io.BufferedReader(decompressed, buffer_size=1 << 16)
            while line := stream.readline(limit + 1):
                line_no += 1
                if len(line) > limit and not line.endswith(b"\n"):
                    n_bytes = _skip_line(stream, len(line))
                    on_record_error(RecordError(loc.uri, f"line {line_no}", f"record_too_large: {n_bytes:,} bytes > "
                                                f"max_record_bytes {limit:,}"))
                    continue
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
            raise ShardError(loc.uri, f"compressed stream is truncated or corrupt ({exc}) after line {line_no}",
                             records_read=n_ok) from exc
        if rows["id"]:
            yield self._table(rows)
        trailing = getattr(decompressed, "trailing", None)
        if trailing is not None:
            offset, n = trailing
            raise ShardError(loc.uri, f"{n:,} trailing bytes from byte {offset:,} on are not {decompressed.kind} data "
                             f"(ignored; all {line_no:,} lines before them were read)", records_read=n_ok)

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
        except (ValueError, RecursionError) as exc:  # an integer of thousands of digits, absurd nesting
            why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split("\n")[0][:120]
            on_error(RecordError(uri, f"line {line_no}", f"invalid_json: {why}"))
            return None
        if not isinstance(record, dict):
            on_error(RecordError(uri, f"line {line_no}", "invalid_json: a line must hold a JSON object"))
            return None
        if _SURROGATE_ESCAPE.search(line):
            where = _lone_surrogate(record)
            if where:
                on_error(RecordError(uri, f"line {line_no}", f"invalid_unicode: lone surrogate escape in {where}; "
                                     "UTF-8 cannot hold it"))
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


def _skip_line(stream: io.BufferedReader, n_bytes: int) -> int:
    """Read past the rest of an over-long line in bounded pieces; return its whole length."""
    while True:
        piece = stream.readline(1 << 20)
        n_bytes += len(piece)
        if not piece or piece.endswith(b"\n"):
            return n_bytes
