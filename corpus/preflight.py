"""Checks a run makes before any work, which `--dry-run` makes too (one function, both paths).

- the data root is a directory we can write (or can be created), so a read-only or non-directory
  root fails in one line instead of a traceback from the middle of a run;
- Parquet inputs share one schema once `input.cast` is applied, so a version never mixes
  `string` with `large_string` or `int64` in one column; the error names the file and the column.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from manifests.errors import ConfigError
from manifests.storage import Location

from .readers import InputFile


def preflight(pipeline, inputs: list[InputFile]) -> None:
    check_root(pipeline.catalog().root)
    if pipeline.input.format == "parquet":
        check_parquet_schemas(inputs, options=pipeline.input.options, cast=pipeline.input.cast)


def check_root(root: Location) -> None:
    """Refuse a root that is a file, or that we cannot write (read-only filesystem, permissions)."""
    if not root.is_local:
        check_object_root(root)
        return
    path = root.path
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    if not os.path.isdir(path):
        raise ConfigError(f"output.root {root.uri}: {path} is a file, not a directory")
    if not os.access(path, os.W_OK | os.X_OK):
        why = "read-only filesystem" if _read_only(path) else "no write permission"
        raise ConfigError(f"output.root {root.uri}: cannot write to {path} ({why})")


def check_object_root(root: Location) -> None:
    """An object-store root: the store answers and the bucket exists, said in one line before any work."""
    bucket = root.path.split("/", 1)[0]
    try:
        info = root.fs.get_file_info(bucket)
    except OSError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"output.root {root.uri}: the object store does not answer ({first}); check the "
                          "credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or an instance profile), the "
                          "region and, for a non-AWS store, ?endpoint_override=host:port in the URI") from None
    if info.type == pafs.FileType.NotFound:
        raise ConfigError(f"output.root {root.uri}: bucket {bucket!r} does not exist; create it first")


def _read_only(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def input_schema(f: InputFile, *, options: dict, cast: dict[str, str]) -> pa.Schema | None:
    """The schema the Parquet reader will produce for `f` after `cast`; None if unreadable
    (the run records an unreadable file as a shard error and goes on)."""
    try:
        with f.location.fs.open_input_file(f.location.path) as fh:
            schema = pq.read_schema(fh)
    except (OSError, pa.ArrowException):
        return None
    columns = options.get("columns")
    if columns:
        schema = pa.schema([schema.field(c) for c in columns if c in schema.names])
    text_field = options.get("text_field", "text")
    fields = []
    for fld in schema:
        name = "text" if fld.name == text_field else fld.name
        typ = pa.type_for_alias(cast[name]) if name in cast else fld.type
        fields.append(pa.field(name, typ))
    return pa.schema(fields)


def check_parquet_schemas(inputs: list[InputFile], *, options: dict, cast: dict[str, str]) -> None:
    first: tuple[InputFile, pa.Schema] | None = None
    for f in inputs:
        if f.location.is_dir():
            continue
        schema = input_schema(f, options=options, cast=cast)
        if schema is None:
            continue
        if first is None:
            first = (f, schema)
            continue
        ref_file, ref = first
        if schema.equals(ref, check_metadata=False):
            continue
        for fld in ref:
            if fld.name not in schema.names:
                raise ConfigError(f"input {f.location.uri}: column {fld.name!r} is missing, but {ref_file.location.uri} "
                                  "has it; one version needs one schema")
            other = schema.field(fld.name).type
            if other != fld.type:
                raise ConfigError(
                    f"input {f.location.uri}: column {fld.name!r} is {other}, but {ref_file.location.uri} has "
                    f"{fld.type}; one version needs one schema: add `input: {{cast: {{{fld.name}: {fld.type}}}}}` "
                    "or fix the file")
        extra = [n for n in schema.names if n not in ref.names]
        raise ConfigError(f"input {f.location.uri}: columns differ from {ref_file.location.uri} "
                          f"({'extra ' + ', '.join(extra) if extra else 'column order'}); one version needs one schema")
