"""Source repositories -> one row per file with its repository and path, and what license decisions read.

Two kinds of input (`format: repos`):
- a directory: a folder of repositories (`repo_depth: 1`, each subfolder a repository; 2 for
  `owner/name` folders; 0 when the input itself is one repository);
- a Parquet or JSON Lines file of files with repository metadata (The Stack style): one row per
  file with its repository and path columns. Rows of one repository are grouped (the whole file is
  read, so keep such files to a few hundred MB).

Rows: id, source (`repo:path`), text, repository, path, and `license_inputs`: the texts of the
repository's license files, REUSE files, package metadata and READMEs and the first lines of files
that mention a license (corpus/code/license_inputs.py), one JSON document per repository,
dictionary-encoded so a batch holds it once. The reader reads; `code_license_v1` decides the license
from those inputs and `code_language_v1` the language. With `license_field` the input table already
says each row's license: the rows get that `license` column instead (`unknown` where it is empty).
Binary, oversized and undecodable files are reported as record errors (`binary`, `too_large`,
`invalid_utf8`), so they are counted, not lost silently.
"""

from __future__ import annotations

import fnmatch
import io
import json
import posixpath
from dataclasses import dataclass, field
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from manifests.errors import RecordError, ShardError

from manifests.config import require
from .base import InputFile, OnRecordError, Reader, stable_id
from .jsonl import open_decompressed

FILE_FIELDS = [("id", pa.string()), ("source", pa.string()), ("text", pa.string()), ("repository", pa.string()),
               ("path", pa.string())]
SCHEMA = pa.schema(FILE_FIELDS + [("license_inputs", pa.dictionary(pa.int32(), pa.string()))])
GIVEN_SCHEMA = pa.schema(FILE_FIELDS + [("license", pa.string())])  # `license_field`: the table's own licenses
PLAIN_SCHEMA = pa.schema(FILE_FIELDS)  # detect_license: false


@dataclass(frozen=True, kw_only=True)
class ReposConfig:
    repo_depth: int = 1  # directory inputs: folder levels that name a repository (0 = the input is one)
    exclude: list[str] = field(default_factory=lambda: [".git", ".hg", ".svn", "node_modules", "__pycache__"])
    max_file_bytes: int = 1_000_000  # larger files -> record error `too_large`
    detect_license: bool = True  # carry the license inputs for code_license_v1 (false: the rows only)
    max_header_files: int = 30  # files whose first lines are carried for the license's header evidence
    # table inputs (.parquet / .jsonl[.gz|.zst]):
    repository_field: str = "repository"
    path_field: str = "path"
    text_field: str = "text"
    license_field: str | None = None  # a column that already holds each row's license (skips detection)

    def __post_init__(self):
        require(0 <= self.repo_depth <= 3, f"repo_depth must be 0..3; got {self.repo_depth}")
        require(self.max_file_bytes > 0, f"max_file_bytes must be > 0; got {self.max_file_bytes}")


class ReposReader(Reader):
    format = "repos"
    Config = ReposConfig

    def read(self, source: InputFile, *, batch_rows: int, on_record_error: OnRecordError) -> Iterator[pa.Table]:
        loc = source.location
        info = loc.fs.get_file_info(loc.path)
        if info.type == pafs.FileType.NotFound:
            raise ShardError(loc.uri, "not found")
        if info.type == pafs.FileType.Directory:
            repos = self._directory_repos(loc)
        else:
            repos = self._table_repos(loc, on_record_error)
        schema = GIVEN_SCHEMA if self.config.license_field else SCHEMA if self.config.detect_license else PLAIN_SCHEMA
        rows: list[dict] = []
        for name, files, given in repos:
            rows.extend(self._repo_rows(name, files, given, loc.uri, on_record_error))
            while len(rows) >= batch_rows:
                yield pa.Table.from_pylist(rows[:batch_rows], schema=schema)
                rows = rows[batch_rows:]
        if rows:
            yield pa.Table.from_pylist(rows, schema=schema)

    # --- directory input ---------------------------------------------------------------------

    def _excluded(self, rel: str) -> bool:
        return any(fnmatch.fnmatch(part, pat) for part in rel.split("/") for pat in self.config.exclude)

    def _directory_repos(self, loc) -> Iterator[tuple[str, dict[str, Callable[[], bytes]]]]:
        fs, base = loc.fs, loc.path.rstrip("/")
        depth = self.config.repo_depth
        if depth == 0:
            roots = [(posixpath.basename(base), base)]
        else:
            level = [base]
            for _ in range(depth):
                level = [i.path for d in level for i in sorted(fs.get_file_info(pafs.FileSelector(d)),
                                                                key=lambda i: i.path)
                         if i.type == pafs.FileType.Directory and not self._excluded(i.base_name)]
            roots = [(posixpath.relpath(p, base), p) for p in level]
        for name, root in roots:
            infos = fs.get_file_info(pafs.FileSelector(root, recursive=True))
            files = {}
            for i in sorted(infos, key=lambda i: i.path):
                rel = posixpath.relpath(i.path, root)
                if i.type != pafs.FileType.File or self._excluded(rel):
                    continue
                if i.size is not None and i.size > self.config.max_file_bytes:
                    files[rel] = _too_large(i.size)
                else:
                    files[rel] = _opener(fs, i.path)
            yield name, files, None

    # --- table input -------------------------------------------------------------------------

    def _table_repos(self, loc, on_record_error: OnRecordError) -> Iterator[tuple[str, dict]]:
        cfg = self.config
        records = self._read_records(loc, on_record_error)
        repos: dict[str, dict] = {}
        given: dict[str, dict[str, str]] = {}  # repo -> path -> license from `license_field`
        for n, rec in enumerate(records):
            repo, path, text = rec.get(cfg.repository_field), rec.get(cfg.path_field), rec.get(cfg.text_field)
            if not isinstance(repo, str) or not isinstance(path, str) or not isinstance(text, str):
                on_record_error(RecordError(loc.uri, f"row {n}", f"missing_field: needs string "
                                            f"{cfg.repository_field!r}, {cfg.path_field!r}, {cfg.text_field!r}"))
                continue
            data = text.encode("utf-8")
            repos.setdefault(repo, {})[path] = (lambda d=data: d)
            if cfg.license_field:
                lic = rec.get(cfg.license_field)
                if isinstance(lic, list):
                    lic = " OR ".join(map(str, lic)) if lic else None
                given.setdefault(repo, {})[path] = lic if lic else "unknown"
        for repo, files in repos.items():
            yield repo, files, given.get(repo)

    def _read_records(self, loc, on_record_error: OnRecordError) -> list[dict]:
        cfg = self.config
        name = loc.path.lower()
        try:
            if name.endswith(".parquet"):
                with loc.fs.open_input_file(loc.path) as f:
                    cols = [c for c in (cfg.repository_field, cfg.path_field, cfg.text_field, cfg.license_field) if c]
                    return pq.read_table(f, columns=cols).to_pylist()
            out = []
            with loc.fs.open_input_stream(loc.path, compression=None) as raw:
                for n, line in enumerate(io.BufferedReader(open_decompressed(loc, raw)), start=1):
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                        on_record_error(RecordError(loc.uri, f"line {n}", f"invalid_json: {exc}"))
                        continue
                    if isinstance(rec, dict):
                        out.append(rec)
            return out
        except (pa.ArrowInvalid, OSError, EOFError, KeyError) as exc:
            raise ShardError(loc.uri, f"cannot read files table ({exc})") from exc

    # --- rows --------------------------------------------------------------------------------

    def _repo_rows(self, name: str, files: dict[str, Callable[[], bytes]], given: dict[str, str] | None,
                   uri: str, on_record_error: OnRecordError) -> list[dict]:
        texts: dict[str, str] = {}
        for path, opener in files.items():
            try:
                data = opener()
            except _TooLarge as exc:
                on_record_error(RecordError(uri, f"{name}:{path}", f"too_large: {exc} bytes"))
                continue
            if b"\x00" in data[:8192]:
                on_record_error(RecordError(uri, f"{name}:{path}", "binary: NUL bytes in the first 8 KiB"))
                continue
            try:
                texts[path] = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                on_record_error(RecordError(uri, f"{name}:{path}", f"invalid_utf8: byte {exc.start}"))
        extra: dict = {}
        if given is None and self.config.detect_license:
            from corpus.code.license_inputs import collect, pack

            blob = pack(collect(sorted(texts), texts.get, max_heads=self.config.max_header_files))
            extra = {"license_inputs": blob}
        rows = []
        for path, text in texts.items():
            row = {"id": stable_id(f"{name}:{path}", 0), "source": f"{name}:{path}", "text": text,
                   "repository": name, "path": path, **extra}
            if given is not None:
                row["license"] = given.get(path, "unknown")
            rows.append(row)
        return rows


class _TooLarge(Exception):
    pass


def _opener(fs, path: str) -> Callable[[], bytes]:
    def read() -> bytes:
        with fs.open_input_stream(path) as f:
            return f.read()
    return read


def _too_large(size: int) -> Callable[[], bytes]:
    def read() -> bytes:
        raise _TooLarge(size)
    return read
