"""Checks a run makes before any work, which `--dry-run` makes too (one function, both paths).

- the data root is a directory we can write (or can be created), so a read-only or non-directory
  root fails in one line instead of a traceback from the middle of a run;
- Parquet inputs share one schema once `input.cast` is applied, so a version never mixes
  `string` with `large_string` or `int64` in one column; the error names the file and the column;
- each Parquet input has the columns `options.columns` names and the columns the first stage reads
  (`Stage.reads`), and a `text` column, if any, is a string: a struct `text`, a file without it or a
  `columns` list that leaves it out would otherwise fail mid-run, after a dry run that passed;
- a catalog version read as input still has every shard at the size and row count its manifest
  says (the bytes themselves are hashed by each task as it reads them, task.py).
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
        first = pipeline.stages[0].reads() if pipeline.stages else ()
        check_parquet_schemas(inputs, options=pipeline.input.options, cast=pipeline.input.cast,
                              reads=first, stage=pipeline.stages[0].name if pipeline.stages else "")


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


def _footer(f: InputFile) -> tuple[pa.Schema, int] | None:
    """The file's Arrow schema and row count from its footer; None if unreadable (the run records an
    unreadable file as a shard error and goes on)."""
    try:
        with f.location.fs.open_input_file(f.location.path) as fh:
            meta = pq.ParquetFile(fh).metadata
            return meta.schema.to_arrow_schema(), meta.num_rows
    except (OSError, pa.ArrowException):
        return None


def input_schema(f: InputFile, *, options: dict, cast: dict[str, str], schema: pa.Schema | None = None) -> pa.Schema | None:
    """The schema the Parquet reader will produce for `f` after `cast`; None if unreadable."""
    if schema is None:
        footer = _footer(f)
        if footer is None:
            return None
        schema = footer[0]
    columns = options.get("columns")
    if columns:
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise ConfigError(f"input {f.location.uri}: input.options.columns names {missing[0]!r}, which the file "
                              f"does not have (its columns: {', '.join(schema.names)})")
        schema = pa.schema([schema.field(c) for c in columns])
    text_field = options.get("text_field", "text")
    fields = []
    for fld in schema:
        name = "text" if fld.name == text_field else fld.name
        typ = pa.type_for_alias(cast[name]) if name in cast else fld.type
        fields.append(pa.field(name, typ))
    return pa.schema(fields)


def _check_columns(f: InputFile, schema: pa.Schema, *, reads: tuple[str, ...], stage: str, options: dict) -> None:
    if not stage:
        return  # no stages: a copy reads no column
    if "text" in schema.names and not (pa.types.is_string(schema.field("text").type) or
                                       pa.types.is_large_string(schema.field("text").type)):
        raise ConfigError(f"input {f.location.uri}: column 'text' is {schema.field('text').type}, not a string; stages "
                          "read it as text: point input.options.text_field at a string column, or cast it with "
                          "`input: {cast: {text: string}}` if its values convert")
    for col in reads:
        if col not in schema.names:
            why = ("input.options.columns leaves it out" if options.get("columns") else
                   f"the file has no such column (its columns: {', '.join(schema.names)})")
            fix = "; set input.options.text_field to the column that holds the text" if col == "text" else ""
            raise ConfigError(f"input {f.location.uri}: stage {stage} reads column {col!r}, but {why}{fix}")


def check_version_shard(f: InputFile, n_rows: int) -> None:
    """A shard of a catalog version: its rows as the manifest says (its bytes are hashed by the task)."""
    if f.rows is not None and n_rows != f.rows:
        raise ConfigError(f"input {f.location.uri} (a shard of {f.version_ref}): holds {n_rows} rows, its manifest "
                          f"says {f.rows}; the version was damaged after publishing (cidermill data verify "
                          f"{f.version_ref})")


def check_parquet_schemas(inputs: list[InputFile], *, options: dict, cast: dict[str, str],
                          reads: tuple[str, ...] = (), stage: str = "") -> None:
    first: tuple[InputFile, pa.Schema] | None = None
    for f in inputs:
        if f.location.is_dir():
            continue
        footer = _footer(f)
        if footer is None:
            if f.version:
                raise ConfigError(f"input {f.location.uri} (a shard of {f.version_ref}) is missing or not a "
                                  "readable Parquet file; the version was damaged after publishing (cidermill data "
                                  f"verify {f.version_ref})")
            continue
        if f.version:
            check_version_shard(f, footer[1])
        schema = input_schema(f, options=options, cast=cast, schema=footer[0])
        _check_columns(f, schema, reads=reads, stage=stage, options=options)
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
