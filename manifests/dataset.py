"""Reading a dataset version: manifest checks, safe shard paths, streaming reads, `verify`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import ManifestError
from .layout import find_manifest, manifest_location
from .manifest import Manifest, ShardInfo
from .storage import Location, safe_relpath


@dataclass(frozen=True)
class ShardProblem:
    path: str
    reason: str


class DatasetVersion:
    """An opened dataset version: its folder (`directory`, the data only) and its manifest (`manifest_loc`,
    beside the folder; inside it in catalogs of the older layout). Construction reads and validates the
    manifest only."""

    def __init__(self, directory: Location | str, *, manifest: Manifest | None = None):
        self.directory = directory if isinstance(directory, Location) else Location.parse(directory)
        manifest_loc = find_manifest(self.directory)
        if manifest_loc is None:
            manifest_loc = manifest_location(self.directory)
            if manifest is None:
                raise ManifestError(
                    f"{self.directory.uri}: no manifest ({manifest_loc.uri}); a version without a manifest is "
                    "incomplete and does not exist"
                )
        self.manifest_loc = manifest_loc
        if manifest is None:
            manifest = Manifest.from_json(manifest_loc.read_bytes(), where=manifest_loc.uri)
        self.manifest = manifest
        # Refuse unsafe paths up front, before anyone opens a shard.
        self._shard_locs = [
            safe_relpath(self.directory, s.path, what=f"{manifest_loc.uri} shard {i}")
            for i, s in enumerate(self.manifest.shards)
        ]

    @property
    def version_id(self) -> str:
        return self.manifest.version_id

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def schema(self) -> pa.Schema:
        return self.manifest.schema

    def shard_locations(self) -> list[Location]:
        return list(self._shard_locs)

    @property
    def data_folder(self) -> Location | None:
        """The folder to point a reader at: the version folder itself, which holds this version's Parquet
        shards and nothing else (the manifest lies beside it), so polars `scan_parquet`, pandas
        `read_parquet`, `pyarrow.dataset.dataset` and Hugging Face `load_dataset("parquet", data_dir=...)`
        read it directly. None for artifacts (tokenizers, token files, mixtures), whose files are not
        Parquet. In a catalog of the older layout the folder still holds `manifest.json` (`cidermill data
        migrate` moves it out), so this is the one subfolder its shards lie in, if they share one."""
        paths = [s.path for s in self.manifest.shards]
        if not paths or not all(p.endswith(".parquet") for p in paths):
            return None
        if not self.legacy_layout:
            return self.directory
        folders = {p.rsplit("/", 1)[0] if "/" in p else "" for p in paths}
        if len(folders) != 1 or "" in folders:
            return None
        return self.directory.join(folders.pop())

    @property
    def legacy_layout(self) -> bool:
        """True when the manifest lies inside the version folder (catalogs written before it moved out)."""
        return self.manifest_loc.path.startswith(self.directory.path.rstrip("/") + "/")

    def shard_path(self, shard: ShardInfo) -> Location:
        return self._shard_locs[self.manifest.shards.index(shard)]

    def iter_batches(
        self, *, columns: list[str] | None = None, batch_rows: int = 8192, verify: bool = False
    ) -> Iterator[pa.RecordBatch]:
        """Every row, shard by shard. Each shard's row count is checked against the manifest once it is read;
        with `verify`, its sha256 too, before any of its rows are handed out (a second read of the shard)."""
        for info, loc in zip(self.manifest.shards, self._shard_locs):
            if verify:
                self.check_bytes(info, loc)
            n_rows = 0
            with loc.fs.open_input_file(loc.path) as f:
                for batch in pq.ParquetFile(f).iter_batches(batch_size=batch_rows, columns=columns):
                    n_rows += batch.num_rows
                    yield batch
            self._check_rows(info, loc, n_rows)

    def read(self, *, columns: list[str] | None = None, verify: bool = False) -> pa.Table:
        """The whole version as one table; row counts checked, and with `verify` every shard's sha256."""
        tables = []
        for info, loc in zip(self.manifest.shards, self._shard_locs):
            if verify:
                self.check_bytes(info, loc)
            with loc.fs.open_input_file(loc.path) as f:
                tables.append(pq.read_table(f, columns=columns))
            self._check_rows(info, loc, tables[-1].num_rows)
        if not tables:
            schema = self.schema if columns is None else pa.schema([self.schema.field(c) for c in columns])
            return schema.empty_table()
        return pa.concat_tables(tables)

    def check_bytes(self, info: ShardInfo, loc: Location) -> None:
        """Refuse, in one line naming the shard, a shard whose bytes are not the ones the manifest hashed."""
        sha, n_bytes = loc.sha256()
        if (sha, n_bytes) != (info.sha256, info.bytes):
            raise ManifestError(f"{loc.uri}: sha256 {sha[:12]} ({n_bytes} bytes) does not match the manifest's "
                                f"{info.sha256[:12]} ({info.bytes} bytes); the shard was replaced or damaged "
                                f"(cidermill data verify {self.name}@{self.version_id[:12]})")

    def _check_rows(self, info: ShardInfo, loc: Location, n_rows: int) -> None:
        if info.path.endswith(".parquet") and n_rows != info.rows:
            raise ManifestError(f"{loc.uri}: {n_rows} rows, the manifest says {info.rows}; the shard was replaced or "
                                f"damaged (cidermill data verify {self.name}@{self.version_id[:12]})")

    def verify(self) -> list[ShardProblem]:
        """Check every shard against the manifest: present, size, sha256, and for Parquet shards
        the Arrow schema and the row count.

        Returns the problems (empty: the version is intact). The manifest's own fields are checked
        when it is opened (`manifest_sha256`); a schema_version 1 manifest has no digest, which
        `unprotected` reports.
        """
        problems = []
        for info, loc in zip(self.manifest.shards, self._shard_locs):
            if not loc.exists():
                problems.append(ShardProblem(info.path, "missing"))
                continue
            sha, n_bytes = loc.sha256()
            if n_bytes != info.bytes:
                problems.append(ShardProblem(info.path, f"size {n_bytes} != manifest {info.bytes}"))
                continue
            if sha != info.sha256:
                problems.append(ShardProblem(info.path, f"sha256 {sha[:12]} != manifest {info.sha256[:12]}"))
                continue
            if not info.path.endswith(".parquet"):
                continue  # other payloads (token .bin/.idx, mixture.json) are checked by hash only
            try:
                with loc.fs.open_input_file(loc.path) as f:
                    pf = pq.ParquetFile(f)
                    schema, n_rows = pf.schema_arrow, pf.metadata.num_rows
            except (OSError, pa.ArrowException) as exc:
                problems.append(ShardProblem(info.path, f"not a readable Parquet file ({exc})"))
                continue
            if not schema.equals(self.schema, check_metadata=False):
                diff = _schema_diff(self.schema, schema)
                problems.append(ShardProblem(info.path, f"schema differs from the manifest: {diff}"))
            if n_rows != info.rows:
                problems.append(ShardProblem(info.path, f"rows {n_rows} != manifest {info.rows}"))
        return problems

    @property
    def unprotected(self) -> bool:
        """True for a manifest written before digests (schema_version 1): edits to it go unnoticed."""
        return self.manifest.schema_version < 2


def _schema_diff(expected: pa.Schema, got: pa.Schema) -> str:
    parts = []
    for f in expected:
        if f.name not in got.names:
            parts.append(f"column {f.name!r} missing")
        elif got.field(f.name).type != f.type:
            parts.append(f"column {f.name!r} is {got.field(f.name).type}, manifest says {f.type}")
    parts += [f"extra column {n!r}" for n in got.names if n not in expected.names]
    return "; ".join(parts) or "field order or nullability"
