"""The catalog: dataset versions under one data root, by name and content-addressed id.

Layout:
    <root>/<name>/<version_id>/manifest.json
    <root>/<name>/<version_id>/shards/part-*.parquet
    <root>/.staging/<name>-<run_key>/           work in progress, never read as a version

A reference is `name` (newest), `name@<id prefix>`, or `<id prefix>` (unique across names).
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from .dataset import DatasetVersion
from .errors import ManifestError
from .manifest import MANIFEST_NAME, Manifest, PipelineInfo, StageStats, version_id_of
from .shards import DEFAULT_TARGET_SHARD_BYTES, ShardWriter
from .storage import Location

STAGING = ".staging"
LATEST = "LATEST"  # <root>/<name>/LATEST holds the id of the version published last under that name


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class VersionEntry:
    name: str
    version_id: str
    created_at: str
    rows: int
    bytes: int
    location: Location
    kind: str = "dataset"  # manifest extra `kind`: dataset, rejects, tokenizer, ...


class Catalog:
    def __init__(self, root: Location | str):
        self.root = root if isinstance(root, Location) else Location.parse(root)

    # ---- listing and lookup -------------------------------------------------------------
    def names(self) -> list[str]:
        return [loc.name for loc in self.root.listdir() if loc.is_dir() and not loc.name.startswith(".")]

    def versions(self, name: str | None = None) -> list[VersionEntry]:
        out = []
        for ds_name in [name] if name else self.names():
            for vdir in self.root.join(ds_name).listdir():
                mloc = vdir.join(MANIFEST_NAME)
                if vdir.name.startswith(".") or not mloc.exists():
                    continue  # no manifest: not a version
                try:
                    m = Manifest.from_json(mloc.read_bytes(), where=mloc.uri)
                except ManifestError:
                    continue  # listed by `verify`, not by `ls`
                out.append(VersionEntry(m.name, m.version_id, m.created_at, m.rows, m.bytes, vdir,
                                        str(m.extra.get("kind", "dataset"))))
        return sorted(out, key=lambda e: (e.name, e.created_at, e.version_id))

    def resolve(self, ref: str) -> DatasetVersion:
        """Open a version by `name` (the one published last), `name@idprefix` or a bare id prefix."""
        name, _, prefix = ref.partition("@")
        if not prefix and name not in self.names():
            name, prefix = "", ref
        if name and not prefix:
            latest = self.root.join(name, LATEST)
            if latest.exists():
                vdir = self.root.join(name, latest.read_bytes().decode().strip())
                if vdir.join(MANIFEST_NAME).exists():
                    return DatasetVersion(vdir)
        candidates = self.versions(name or None)
        if prefix:
            candidates = [e for e in candidates if e.version_id.startswith(prefix)]
        if not candidates:
            raise ManifestError(f"no dataset version matches {ref!r} under {self.root.uri} (see `cidermill data ls`)")
        if prefix and len({e.version_id for e in candidates}) > 1:
            ids = ", ".join(f"{e.name}@{e.version_id[:12]}" for e in candidates[:5])
            raise ManifestError(f"{ref!r} is ambiguous: {ids}; give a longer id prefix")
        return DatasetVersion(candidates[-1].location)

    # ---- publishing ---------------------------------------------------------------------
    def staging_dir(self, name: str, run_key: str) -> Location:
        return self.root.join(STAGING, f"{name}-{run_key[:16]}")

    def publish(self, staging: Location, manifest: Manifest, *, cleanup: bool = True) -> DatasetVersion:
        """Move finished shards from `staging` into `<root>/<name>/<id>/`, manifest last.

        Publishing the same content twice is a no-op that returns the existing version.
        `cleanup` deletes the staging directory afterwards.
        """
        target = self.root.join(manifest.name, manifest.version_id)
        latest = self.root.join(manifest.name, LATEST)
        if target.join(MANIFEST_NAME).exists():
            if cleanup:
                staging.delete()
            latest.write_bytes_atomic(manifest.version_id.encode())  # publishing A, B, A again: A is latest
            return DatasetVersion(target)
        target.mkdir()
        for shard in manifest.shards:
            dst = target.join(shard.path)
            dst_parent = Location(dst.fs, dst.path.rsplit("/", 1)[0])
            dst_parent.mkdir()
            staging.join(shard.path).move_to(dst)
        if not manifest.created_at:
            manifest.created_at = utc_now()
        target.join(MANIFEST_NAME).write_bytes_atomic(manifest.to_json().encode())
        latest.write_bytes_atomic(manifest.version_id.encode())
        if cleanup:
            staging.delete()
        return DatasetVersion(target)

    def write_table(
        self,
        name: str,
        tables: Iterable[pa.Table] | pa.Table,
        *,
        pipeline: PipelineInfo | None = None,
        parents: list[str] | None = None,
        stats: list[StageStats] | None = None,
        extra: dict | None = None,
        target_bytes: int = DEFAULT_TARGET_SHARD_BYTES,
        schema: pa.Schema | None = None,
    ) -> DatasetVersion:
        """Write in-memory tables as a new version (for small outputs: rejects, artifacts, tests)."""
        if isinstance(tables, pa.Table):
            tables = [tables]
        run_key = uuid.uuid4().hex  # a fresh staging dir for each call
        staging = self.staging_dir(name, run_key)
        writer = ShardWriter(staging.join("shards"), "part-00000", relative_dir="shards", target_bytes=target_bytes)
        for t in tables:
            writer.write(t)
        shards = writer.close()
        final_schema = writer.schema or schema
        if final_schema is None:
            raise ManifestError(f"{name}: cannot write a version with no rows and no schema")
        manifest = Manifest(
            name=name,
            version_id=version_id_of([s.sha256 for s in shards]),
            shards=shards,
            schema=final_schema,
            pipeline=pipeline,
            parents=list(parents or []),
            stats=list(stats or []),
            extra=dict(extra or {}),
        )
        return self.publish(staging, manifest)


@dataclass
class VersionDiff:
    a: str
    b: str
    added_ids: list[str]
    removed_ids: list[str]
    rows_a: int
    rows_b: int
    stats_delta: list[dict]


def diff_versions(a: DatasetVersion, b: DatasetVersion) -> VersionDiff:
    """Rows added/removed by `id` (b relative to a) and per-stage statistic deltas."""
    for v in (a, b):
        if "id" not in v.schema.names:
            raise ManifestError(f"{v.name}@{v.version_id[:12]} has no `id` column; diff needs row ids")
    ids_a = a.read(columns=["id"]).column("id")
    ids_b = b.read(columns=["id"]).column("id")
    added = pc.filter(ids_b, pc.invert(pc.is_in(ids_b, value_set=ids_a)))
    removed = pc.filter(ids_a, pc.invert(pc.is_in(ids_a, value_set=ids_b)))
    stats_a = {s.name: s for s in a.manifest.stats}
    stats_b = {s.name: s for s in b.manifest.stats}
    deltas = []
    for stage in list(dict.fromkeys([*stats_a, *stats_b])):
        sa, sb = stats_a.get(stage, StageStats(stage)), stats_b.get(stage, StageStats(stage))
        reasons = sorted(set(sa.dropped) | set(sb.dropped))
        deltas.append({
            "stage": stage,
            "rows_out": sb.rows_out - sa.rows_out,
            "dropped": {r: sb.dropped.get(r, 0) - sa.dropped.get(r, 0) for r in reasons},
        })
    return VersionDiff(
        a=a.version_id, b=b.version_id,
        added_ids=sorted(added.to_pylist()), removed_ids=sorted(removed.to_pylist()),
        rows_a=a.manifest.rows, rows_b=b.manifest.rows, stats_delta=deltas,
    )
