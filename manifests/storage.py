"""Storage through pyarrow.fs, so a local path and an object-store URI work alike.

`Location` pairs a pyarrow FileSystem with a path inside it. Local paths get fsync on
atomic writes; object stores get a single PUT, which is atomic there already.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import posixpath
import uuid
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

_CHUNK = 4 << 20
SCHEMES = frozenset({"file", "s3", "gs", "gcs", "mock"})  # what pyarrow.fs opens without a JVM (mock: tests)
GCS_RETRY_LIMIT_S = 15  # gs:// gives up on an unreachable or unauthorised store after this long


@dataclass(frozen=True)
class Location:
    fs: pafs.FileSystem
    path: str

    @classmethod
    def parse(cls, uri_or_path: str | os.PathLike) -> "Location":
        """`/data/x`, `./x`, `file:///data/x`, `s3://bucket/x`, `gs://...` all resolve here. Another scheme
        (`hdfs://` needs a JVM, and nothing here tests it) is a one-line ConfigError."""
        text = os.fspath(uri_or_path)
        if "://" in text:
            from .errors import ConfigError

            scheme = text.split("://", 1)[0].lower()
            if scheme not in SCHEMES:
                raise ConfigError(f"{text}: storage scheme {scheme + '://'!r} is not supported; use a local path, "
                                  f"{', '.join(s + '://' for s in sorted(SCHEMES) if s != 'mock')}")
            if scheme in ("gs", "gcs") and "retry_limit_seconds=" not in text:
                # without it a machine with no network or credentials retries for minutes before it fails
                text += ("&" if "?" in text else "?") + f"retry_limit_seconds={GCS_RETRY_LIMIT_S}"
            try:
                fs, path = pafs.FileSystem.from_uri(text)
            except (ValueError, OSError, pa.ArrowException) as exc:  # bad query option, missing library
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ConfigError(f"{text}: not a storage URI pyarrow.fs can open ({first})") from None
            return cls(fs, path.rstrip("/") or "/")
        return cls(pafs.LocalFileSystem(), os.path.abspath(text))

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    @property
    def uri(self) -> str:
        return self.path if self.is_local else f"{self.fs.type_name}://{self.path}"

    def join(self, *parts: str) -> "Location":
        return Location(self.fs, posixpath.join(self.path, *parts))

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)

    def exists(self) -> bool:
        return self.fs.get_file_info(self.path).type != pafs.FileType.NotFound

    def is_dir(self) -> bool:
        return self.fs.get_file_info(self.path).type == pafs.FileType.Directory

    def size(self) -> int:
        return self.fs.get_file_info(self.path).size

    def mkdir(self) -> None:
        self.fs.create_dir(self.path, recursive=True)

    def listdir(self) -> list["Location"]:
        if not self.is_dir():
            return []
        infos = self.fs.get_file_info(pafs.FileSelector(self.path, recursive=False))
        return sorted((Location(self.fs, i.path) for i in infos), key=lambda loc: loc.path)

    def file_sizes(self) -> dict[str, int]:
        """{name: bytes} of the files directly under this directory, in one listing ({} if absent).

        On an object store this is one LIST request per 1,000 keys, not one request per file."""
        infos = self.fs.get_file_info(pafs.FileSelector(self.path, recursive=False, allow_not_found=True))
        return {posixpath.basename(i.path): i.size for i in infos if i.type == pafs.FileType.File}

    def glob(self) -> list["Location"]:
        """The files matching this path's wildcards, sorted: `*`, `?` and `[...]` within one path
        component, `**` for any number of components. Listed through the filesystem (one recursive
        listing under the part before the first wildcard), so `s3://b/crawl/*/part-*.warc.gz`
        works as a local glob does. A path without wildcards gives itself if it exists."""
        parts = self.path.split("/")
        first = next((i for i, p in enumerate(parts) if any(c in p for c in "*?[")), None)
        if first is None:
            return [self] if self.exists() else []
        base = "/".join(parts[:first]) or "/"
        pattern = parts[first:]
        infos = self.fs.get_file_info(pafs.FileSelector(base, recursive=len(pattern) > 1 or "**" in pattern,
                                                        allow_not_found=True))
        found = [i.path for i in infos if i.type == pafs.FileType.File
                 and _match(posixpath.relpath(i.path, base).split("/"), pattern)]
        return [Location(self.fs, p) for p in sorted(found)]

    def read_bytes(self) -> bytes:
        with self.fs.open_input_stream(self.path, compression=None) as f:
            return f.read()

    def write_bytes_atomic(self, data: bytes) -> None:
        """Write to a temporary name, flush to disk, then rename over the target."""
        if self.is_local:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            tmp = f"{self.path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            try:
                with open(tmp, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path)
            except BaseException:  # a full disk or a kill: leave no temporary file behind
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
            _fsync_dir(os.path.dirname(self.path))
        else:  # an object-store PUT is atomic: readers see all of it or nothing
            with self.fs.open_output_stream(self.path, compression=None) as f:  # bytes as given
                f.write(data)

    def move_to(self, dst: "Location") -> None:
        self.fs.move(self.path, dst.path)

    def delete(self) -> None:
        info = self.fs.get_file_info(self.path)
        if info.type == pafs.FileType.Directory:
            self.fs.delete_dir(self.path)
        elif info.type == pafs.FileType.File:
            self.fs.delete_file(self.path)

    def sha256(self) -> tuple[str, int]:
        """Return (hex digest, byte count) of the file, streamed."""
        digest = hashlib.sha256()
        n_bytes = 0
        with self.fs.open_input_stream(self.path, compression=None) as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
                n_bytes += len(chunk)
        return digest.hexdigest(), n_bytes


def _match(names: list[str], pattern: list[str]) -> bool:
    if not pattern:
        return not names
    if pattern[0] == "**":
        return any(_match(names[i:], pattern[1:]) for i in range(len(names) + 1))
    return bool(names) and fnmatch.fnmatchcase(names[0], pattern[0]) and _match(names[1:], pattern[1:])


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def safe_relpath(base: Location, relative: str, *, what: str) -> Location:
    """Resolve `relative` under `base`, refusing absolute paths and `..` escapes."""
    if not relative or relative.startswith(("/", "\\")) or "://" in relative:
        from .errors import ManifestError

        raise ManifestError(f"{what}: path {relative!r} must be relative to the version directory")
    norm = posixpath.normpath(relative)
    if norm == ".." or norm.startswith("../") or "\\" in relative:
        from .errors import ManifestError

        raise ManifestError(f"{what}: path {relative!r} escapes the version directory {base.uri}")
    return base.join(norm)
