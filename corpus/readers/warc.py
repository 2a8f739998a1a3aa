"""WARC files through FastWARC (resiliparse) at its native speed, with broken framing detected.

FastWARC trusts each record's Content-Length: it hands out that many bytes as the block and then
expects the next record's header. So a record whose length is wrong is returned with a wrong body
(the next record's header bytes, or a cut one), and FastWARC stops at the bytes that follow. Here:

- A record is kept only once what follows it parsed as the next record (or the file ended cleanly).
  When FastWARC stops after a record instead, that record's framing is checked on the raw bytes
  (its block must be followed by CRLF CRLF, and in a gzip member per record, by the member's end):
  a record that fails is dropped as `bad_content_length`; one that passes is kept.
- A record whose `WARC-Block-Digest` does not match its block is dropped as `block_digest_mismatch`
  (this catches a length that is off by a few bytes, which FastWARC reads past quietly).
- Then the reader resynchronises: it finds the next record start (a `WARC/1.x` line, or the next gzip
  member that holds one) and goes on from there, so the records after a broken one are not lost. The
  bytes skipped are reported as `unreadable_bytes`; bytes after the last record that are not zeros
  end the file as a ShardError (every record before them kept).
- A block shorter than its Content-Length means the file ends inside the record: dropped as
  `truncated_record`, and the file reported as a ShardError.

HTTP headers are parsed here from the block, which is what makes the length check possible
(FastWARC's own HTTP parsing hides the header size).
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa
from fastwarc.warc import ArchiveIterator, WarcRecordType

from manifests.config import require
from manifests.errors import RecordError, ShardError

from .base import InputFile, OnRecordError, Reader

_TYPES = {"response": WarcRecordType.response, "resource": WarcRecordType.resource,
          "conversion": WarcRecordType.conversion, "request": WarcRecordType.request}
_MAX_HTTP_HEADER = 1 << 16
_MAX_WARC_HEADER = 1 << 16
_GZIP = b"\x1f\x8b"

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
        require(0 < self.max_payload_bytes <= 1 << 32, f"max_payload_bytes must be between 1 and 4GiB; "
                f"got {self.max_payload_bytes}")


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


def digest_mismatch(headers, block: bytes) -> str | None:
    """Why the block does not match its `WARC-Block-Digest` (sha1/sha256/md5, base32 or hex), or None
    (it matches, or there is no digest or one of another algorithm to check)."""
    value = (headers.get("WARC-Block-Digest") or "").strip()
    algo, _, encoded = value.partition(":")
    algo = algo.lower()
    if algo not in ("sha1", "sha256", "md5") or not encoded:
        return None
    digest = hashlib.new(algo, block).digest()
    if encoded.lower() in (digest.hex(), base64.b32encode(digest).decode().lower()):
        return None
    return f"{algo} of the {len(block):,}-byte block is not the header's {encoded[:16]}"


class WarcReader(Reader):
    format = "warc"
    Config = WarcConfig

    def read(self, source: InputFile, *, batch_rows: int, on_record_error: OnRecordError) -> Iterator[pa.Table]:
        loc = source.location
        types = 0
        for t in self.config.record_types:
            types |= _TYPES[t]
        state = _State()
        stream = self.open_stream(source)  # hashed as FastWARC reads it (base.py)
        raw = None  # a random-access handle, opened only to check framing and resynchronise
        start, f = 0, stream
        floor = -1  # where the last resync restarted: the next one looks strictly after it, so it progresses
        try:
            while True:
                problem = yield from self._records(f, start, source, types, state, batch_rows, on_record_error)
                if problem is None:
                    break  # the end of the file
                if raw is None:
                    raw = loc.fs.open_input_file(loc.path)
                    state.gz = raw.read(2) == _GZIP
                after = max(self._settle(raw, problem, state, loc.uri, on_record_error), floor)
                nxt = _next_record_start(raw, after, gz=state.gz)
                if nxt is None:
                    if state.clean_end is not None:
                        tail = _nonzero_tail(raw, state.clean_end)
                        if tail is not None:
                            state.shard_error = (f"{tail[1]:,} bytes from byte {tail[0]:,} on are not WARC records "
                                                 f"({problem.reason}); every record before them was read")
                    elif not state.n_seen:
                        state.shard_error = f"no WARC record could be read ({problem.reason})"
                    else:
                        state.shard_error = (f"nothing after offset {after} could be read as a WARC record "
                                             f"({problem.reason})")
                    break
                gap_from = state.clean_end if state.clean_end is not None else problem.after
                if not problem.reported and nxt > max(gap_from, 0):
                    on_record_error(RecordError(loc.uri, f"offset {max(gap_from, 0)}", f"unreadable_bytes: "
                                                f"{nxt - max(gap_from, 0):,} bytes up to the next record at offset "
                                                f"{nxt} skipped ({problem.reason})"))
                raw.seek(nxt)
                start, f, floor = nxt, raw, nxt
        finally:
            if raw is not None:
                raw.close()
        if len(state.rows):
            yield state.rows.table()
        if state.shard_error:
            raise ShardError(loc.uri, state.shard_error, records_read=state.n_kept)

    def _records(self, f, start: int, source: InputFile, types: int, state: "_State", batch_rows: int,
                 on_record_error: OnRecordError):
        """Read records from `f` (positioned at `start`, a record start) into `state.rows`, yielding full
        batches. Returns None at a clean end of file, else the `_Problem` where FastWARC stopped."""
        uri = source.location.uri
        limit = self.config.max_payload_bytes + _MAX_HTTP_HEADER
        state.pending = None
        last = start if start else -1  # the last record start seen; a resync looks after it
        dropped = None  # the last record dropped with its own reason (its bytes are accounted for)
        try:
            # every type: a record of a type not kept still tells where the one before it ended
            for record in ArchiveIterator(f, record_types=WarcRecordType.any_type, parse_http=False,
                                          strict_mode=False):
                state.commit()  # FastWARC parsed this record's header: the one before ended where it said
                offset = last = record.stream_pos
                rid = (record.record_id or "").strip("<>").removeprefix("urn:uuid:")
                where = f"offset {offset} record {rid or '?'}"
                if not record.record_type & types:
                    state.pending = _Pending(None, offset, record.content_length, where)  # checked, not kept
                    continue
                state.n_seen += 1
                if record.content_length > limit:
                    on_record_error(RecordError(uri, where, f"payload_too_large: {record.content_length} "
                                                f"bytes > {self.config.max_payload_bytes}"))
                    dropped = offset
                    continue
                try:
                    block = record.reader.read()
                except OSError as exc:  # corrupt data inside this record's block: the record is lost
                    reason = _first_line(exc)
                    on_record_error(RecordError(uri, where, f"corrupt_record: {reason}"))
                    return _Problem(reason, after=offset, reported=True)
                if len(block) < record.content_length:
                    on_record_error(RecordError(uri, where, "truncated_record: the file ends inside "
                                                f"this record ({len(block)} of {record.content_length} bytes)"))
                    state.shard_error = f"WARC file is truncated (ends inside {where})"
                    return None
                bad_digest = digest_mismatch(record.headers, block)
                if bad_digest:
                    on_record_error(RecordError(uri, where, f"block_digest_mismatch: {bad_digest} (a wrong "
                                                "Content-Length or damaged bytes)"))
                    dropped = offset
                    continue
                if not rid:
                    on_record_error(RecordError(uri, where, "missing_record_id: no WARC-Record-ID header"))
                    dropped = offset
                    continue
                status, ctype, body = split_http(block)
                url = (record.headers.get("WARC-Target-URI") or "").strip("<>")
                row = (rid, url or f"{source.key}@{offset}", url or None, record.headers.get("WARC-Date"),
                       record.headers.get("WARC-Type"), status, ctype, body, source.key, offset)
                state.pending = _Pending(row, offset, record.content_length, where)
                if len(state.rows) >= batch_rows:
                    yield state.rows.table()
                    state.rows = _Columns()
        except OSError as exc:  # FastWARC: the next header is not WARC, corrupt deflate data between records
            if state.pending is not None:
                return _Problem(_first_line(exc), after=state.pending.offset)
            return _Problem(_first_line(exc), after=last, reported=dropped is not None and dropped == last)
        state.commit()
        return None

    def _settle(self, raw, problem: "_Problem", state: "_State", uri: str, on_record_error: OnRecordError) -> int:
        """FastWARC stopped after `state.pending` (if any): keep it if its framing checks on the raw bytes,
        else drop it. Returns the offset after which to look for the next record."""
        state.clean_end = None
        p = state.pending
        state.pending = None
        if p is None:
            return problem.after
        ok, end = _record_end(raw, p.offset, p.content_length, gz=state.gz)
        if ok:
            state.pending = p
            state.commit()
            state.clean_end = end
            return end - 1 if end is not None else p.offset
        if p.row is not None:  # a record of a type not kept is not reported; the bytes after it are
            on_record_error(RecordError(uri, p.where, f"bad_content_length: Content-Length {p.content_length} does "
                                        f"not end the record (what follows is not the record's end; {problem.reason})"))
            problem.reported = True
        return p.offset


@dataclass
class _Pending:
    row: tuple
    offset: int
    content_length: int
    where: str


@dataclass
class _Problem:
    reason: str
    after: int  # look for the next record start after this offset
    reported: bool = False  # the bytes up to the next record belong to a record already dropped with a reason


@dataclass
class _State:
    rows: "_Columns" = field(default_factory=lambda: _Columns())
    pending: _Pending | None = None
    n_kept: int = 0
    n_seen: int = 0
    gz: bool = False
    clean_end: int | None = None  # where the last record checked on the raw bytes ends
    shard_error: str | None = None

    def commit(self) -> None:
        if self.pending is not None and self.pending.row is not None:
            self.rows.append(*self.pending.row)
            self.n_kept += 1
        self.pending = None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _record_end(raw, offset: int, content_length: int, *, gz: bool) -> tuple[bool, int | None]:
    """Whether the record at `offset` has a block of `content_length` bytes followed by the record's end
    (CRLF CRLF; in a gzip member per record, then the member's end), and the offset just after it (None
    where it cannot be known: a gzip member holding several records)."""
    need = _MAX_WARC_HEADER + content_length + 4
    raw.seek(offset)
    if gz:
        d = zlib.decompressobj(wbits=31)
        out = b""
        consumed = 0
        try:
            while not d.eof and len(out) < need:
                chunk = raw.read(1 << 16)
                if not chunk:
                    return False, None
                out += d.decompress(chunk, need - len(out))
                consumed += len(chunk) - len(d.unconsumed_tail) - len(d.unused_data)
        except zlib.error:
            return False, None  # no gzip member starts here: the framing cannot be checked, so it is not trusted
    else:
        out = raw.read(need)
    hdr = out.find(b"\r\n\r\n", 0, _MAX_WARC_HEADER)
    sep = 4
    if hdr < 0:
        hdr, sep = out.find(b"\n\n", 0, _MAX_WARC_HEADER), 2
        if hdr < 0:
            return False, None
    tail_at = hdr + sep + content_length
    if out[tail_at:tail_at + 4] != b"\r\n\r\n":
        return False, None
    if not gz:
        return True, offset + tail_at + 4
    if d.eof and len(out) == tail_at + 4:
        return True, offset + consumed  # one record per member, ending with it
    return (True, None) if len(out) > tail_at + 4 and out[tail_at + 4:].lstrip(b"\r\n").startswith(b"WARC/") \
        else (False, None)


def _next_record_start(raw, after: int, *, gz: bool) -> int | None:
    """The offset of the first record start after `after`: a `WARC/1.x` (or 0.x) line, or in a gzip file
    a gzip member whose data begins with one."""
    size = raw.size()
    pos = after + 1
    overlap = 16
    while pos < size:
        raw.seek(pos)
        chunk = raw.read(1 << 20)
        if not chunk:
            return None
        if gz:
            i = chunk.find(b"\x1f\x8b\x08")
            while i >= 0:
                if _member_starts_record(raw, pos + i):
                    return pos + i
                i = chunk.find(b"\x1f\x8b\x08", i + 1)
        else:
            for marker in (b"\nWARC/1.", b"\nWARC/0."):
                i = chunk.find(marker)
                if i >= 0:
                    return pos + i + 1
        if len(chunk) <= overlap:
            return None
        pos += len(chunk) - overlap
    return None


def _member_starts_record(raw, offset: int) -> bool:
    raw.seek(offset)
    d = zlib.decompressobj(wbits=31)
    try:
        head = d.decompress(raw.read(4096), 64)
    except zlib.error:
        return False
    return head.lstrip(b"\r\n").startswith((b"WARC/1.", b"WARC/0."))


def _nonzero_tail(raw, after: int) -> tuple[int, int] | None:
    """(offset, bytes) of what follows `after` (the end of the last good record) unless it is nothing or
    only zero padding."""
    size = raw.size()
    if after >= size:
        return None
    raw.seek(after)
    pos = after
    while chunk := raw.read(1 << 20):
        if chunk.strip(b"\0\r\n"):
            return after, size - after
        pos += len(chunk)
    return None


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
