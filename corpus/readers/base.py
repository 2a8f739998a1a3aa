"""Readers turn one input file into a stream of Arrow tables with `id` and `source` columns.

A reader reports a broken record through `on_record_error` (counted as a drop by reason, the task
goes on) and a broken file by raising ShardError after yielding what it could read.

Every task records the sha256 of the input bytes it read (`input_digest`), so that a resumed run
reuses a task only for the same bytes. Readers that stream a file front to back open it with
`open_stream`, which hashes the bytes as they pass (no second read, which matters for inputs on
an object store); the others (Parquet reads footers and column chunks out of order, directories)
are hashed by a separate read, checked against the file's size and mtime before and after.
"""

from __future__ import annotations

import hashlib
import io
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, ClassVar, Iterator

import pyarrow as pa
import pyarrow.fs as pafs

from manifests.errors import FatalError, RecordError
from manifests.hashing import in_background
from manifests.storage import Location

from manifests.config import build_config

OnRecordError = Callable[[RecordError], None]


@dataclass(frozen=True)
class InputFile:
    """One input of a run: where it is and the stable key its row ids derive from."""

    location: Location
    key: str  # path relative to the inputs' common base: stable across machines
    sha256: str | None = None  # the bytes' sha256 when known before reading: a version's manifest, an earlier pass
    rows: int | None = None  # the rows the manifest promises (a version's shard)
    version: str | None = None  # `name@id` of the catalog version this shard belongs to
    verify: bool = True  # check the bytes against `sha256` (off only for this run's own staged shards)

    @property
    def version_ref(self) -> str:
        """`name@<12 hex>` of the version this shard belongs to, for messages; "" for other inputs."""
        name, _, vid = (self.version or "").partition("@")
        return f"{name}@{vid[:12]}" if vid else ""


@dataclass(frozen=True)
class InputDigest:
    sha256: str
    bytes: int


class HashingStream(io.RawIOBase):
    """A read-only stream that hashes every byte it hands out, once, in order. `finish()` reads and
    hashes whatever the reader left unread (a truncated file's tail, a gzip trailer), so the digest
    always covers the whole file."""

    def __init__(self, raw):
        self._raw = raw
        self._sha = hashlib.sha256()
        self._n = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self._raw.read(len(b))
        n = len(data)
        b[:n] = data
        self._sha.update(data)
        self._n += n
        return n

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read() if size is None or size < 0 else self._raw.read(size)
        self._sha.update(data)
        self._n += len(data)
        return data

    def tell(self) -> int:
        return self._n

    def finish(self) -> InputDigest:
        while chunk := self._raw.read(4 << 20):
            self._sha.update(chunk)
            self._n += len(chunk)
        self._raw.close()
        return InputDigest(self._sha.hexdigest(), self._n)

    def close(self) -> None:
        # A wrapper a reader closes (io.BufferedReader does when it goes) leaves the file open for
        # `finish`, which closes it; a stream nobody finishes is closed when it is collected.
        super().close()


def file_identity(loc: Location) -> tuple:
    """What changes when a file (or any file under a directory) is rewritten: sizes and mtimes."""
    info = loc.fs.get_file_info(loc.path)
    if info.type == pafs.FileType.Directory:
        infos = loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=True))
        return tuple(sorted((i.path, i.size, i.mtime_ns) for i in infos if i.type == pafs.FileType.File))
    return (info.type, info.size, info.mtime_ns)


def location_digest(loc: Location) -> InputDigest:
    """sha256 of a file's bytes, or for a directory of its files' relative paths and sha256s (sorted)."""
    if loc.is_dir():
        outer = hashlib.sha256(b"cidermill-directory-v1\n")
        total = 0
        infos = loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=True))
        for info in sorted((i for i in infos if i.type == pafs.FileType.File), key=lambda i: i.path):
            sha, n = Location(loc.fs, info.path).sha256()
            outer.update(f"{info.path[len(loc.path):].lstrip('/')}\0{sha}\n".encode())
            total += n
        return InputDigest(outer.hexdigest(), total)
    sha, n = loc.sha256()
    return InputDigest(sha, n)


def stable_id(key: str, index: int) -> str:
    return hashlib.blake2b(f"{key}#{index}".encode(), digest_size=8).hexdigest()


def stable_ids(key: str, start: int, count: int) -> pa.Array:
    return pa.array([stable_id(key, i) for i in range(start, start + count)], pa.string())


class Reader(ABC):
    format: ClassVar[str]
    Config: ClassVar[type]
    # hash the input in a thread while `read` decodes it (a reader that reads the file out of order and
    # does not stream it; hashing.py): the same bytes and checks as hashing after `read`, off its path
    digest_while_reading: ClassVar[bool] = False

    def __init__(self, config=None):
        self.config = build_config(self.Config, config, where=f"input (format {self.format})")
        self._stream: HashingStream | None = None
        self._identity: tuple | None = None
        self._pending_digest = None  # see `begin`

    @abstractmethod
    def read(self, source: InputFile, *, batch_rows: int, on_record_error: OnRecordError) -> Iterator[pa.Table]:
        ...

    def open_stream(self, source: InputFile) -> HashingStream:
        """The input's bytes front to back, hashed on the way (see `input_digest`)."""
        loc = source.location
        self._stream = HashingStream(loc.fs.open_input_stream(loc.path, compression=None))
        return self._stream

    def begin(self, source: InputFile, *, digest_in_background: bool = False) -> None:
        """Called by the task before `read`: note the file's identity for a reader that does not stream. With
        `digest_in_background` (the task will ask `input_digest` and has a core to spare), a reader that sets
        `digest_while_reading` starts hashing the input now, in a thread, so the hash overlaps the decoding
        instead of following it."""
        self._stream = None
        self._identity = file_identity(source.location)
        self._pending_digest = None
        if digest_in_background and self.digest_while_reading:
            loc = source.location
            self._pending_digest = in_background(lambda: location_digest(loc), name="input-sha256")

    def input_digest(self, source: InputFile) -> InputDigest:
        """After `read`: the sha256 of the bytes it read. A streamed input is hashed to its end; any other
        is read once more, and must not have changed since `begin` (else the rows may come from other
        bytes than the hash)."""
        pending, self._pending_digest = self._pending_digest, None
        if self._stream is not None:
            digest = self._stream.finish()
            self._stream = None
            return digest
        # the same check either way: the bytes hashed (now or meanwhile) are those read only if the file's
        # size and mtime are still those `begin` saw
        digest = pending() if pending is not None else location_digest(source.location)
        if self._identity is not None and file_identity(source.location) != self._identity:
            raise FatalError(f"input {source.location.uri} changed while the task read it (size or mtime); "
                             "run again once nothing writes to the inputs")
        return digest
