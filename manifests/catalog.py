"""The catalog: dataset versions under one data root, by name and content-addressed id.

Layout (layout.py):
    <root>/<name>/<version_id>.manifest.json    the manifest, beside the version folder, written last
    <root>/<name>/<version_id>/shards/part-*.parquet
                                                the folder holds data only, so Parquet readers take it as it is
    <root>/<name>/LATEST                        the id published last under that name
    <root>/.staging/<name>-<run_key>/           work in progress, never read as a version
    <root>/.locks/<key>.lock                    who is publishing a name / running a run key

A version exists once its manifest does. A run's rejects (`<name>.rejects`) carry `rejects_of`
and are listed only once that version's manifest exists too, so the catalog sees a version and
its rejects appear together (the main manifest is the single commit point).

Catalogs of the older layout (`<version_id>/manifest.json`) are read, published into and signed as well;
`migrate_layout` (`cidermill data migrate`) moves their manifests out of the folders.

A reference is `name` (newest), `name@<id prefix>`, or `<id prefix>` (unique across names).
"""

from __future__ import annotations

import datetime as dt
import difflib
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from .dataset import DatasetVersion
from .errors import ManifestError
from .locks import Lock
from .layout import (LEGACY_MANIFEST_NAME, find_manifest, legacy_manifest_location, manifest_location,
                     version_id_of_manifest_file)
from .manifest import Manifest, PipelineInfo, StageStats, version_id_of
from .shards import DEFAULT_TARGET_SHARD_BYTES, ShardWriter
from .names import REJECTS_SUFFIX, is_valid_name, validate_name
from .storage import Location

log = logging.getLogger("cidermill.catalog")

STAGING = ".staging"
_VERSION_DIR = re.compile(r"[0-9a-f]{64}")
_HEX_PREFIX = re.compile(r"[0-9a-f]{1,64}")
LATEST = "LATEST"  # <root>/<name>/LATEST holds the id of the version published last under that name


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _delete_quietly(loc: Location) -> None:
    try:
        loc.delete()
    except OSError as exc:  # cleaning up is best effort; the publish itself does not depend on it
        log.warning("could not delete %s: %s", loc.uri, exc)


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


@dataclass(frozen=True)
class SkippedManifest:
    """A manifest under the root that does not check: `ls` goes on without it and says so."""

    uri: str
    reason: str


class Catalog:
    def __init__(self, root: Location | str):
        self.root = root if isinstance(root, Location) else Location.parse(root)

    # ---- listing and lookup -------------------------------------------------------------
    def names(self) -> list[str]:
        return [loc.name for loc in self.root.listdir() if loc.is_dir() and is_valid_name(loc.name)]

    def versions(self, name: str | None = None, *, skipped: list[SkippedManifest] | None = None) -> list[VersionEntry]:
        """Every version that checks, oldest first. A manifest that does not parse, fails its digest or
        signature, or lies about its name or id (a directory copied under another name) is left out and,
        with `skipped`, reported there: one bad manifest never hides the others."""
        out = []
        for ds_name in [name] if name else self.names():
            try:
                found = self._manifests_of(ds_name)
            except OSError as exc:  # an unreadable folder hides its own versions, not the others'
                if skipped is not None:
                    skipped.append(SkippedManifest(self.root.join(ds_name).uri, _first_line(exc)))
                continue
            for vid, mloc in found.items():
                vdir = self.root.join(ds_name, vid)
                try:
                    m = self.open_manifest(vdir, ds_name, mloc)
                except (ManifestError, OSError) as exc:
                    if skipped is not None:
                        skipped.append(SkippedManifest(mloc.uri, _first_line(exc)))
                    continue  # listed by `verify`, not by `ls`
                if not self._owner_published(m):
                    continue  # rejects of a version whose publish did not finish
                out.append(VersionEntry(m.name, m.version_id, m.created_at, m.rows, m.bytes, vdir,
                                        str(m.extra.get("kind", "dataset"))))
        return sorted(out, key=lambda e: (e.name, e.created_at, e.version_id))

    def _manifests_of(self, name: str) -> dict[str, Location]:
        """{version id: its manifest} under `<root>/<name>/`, from one listing: `<id>.manifest.json` files, and
        for folders without one, `<id>/manifest.json` (the older layout). A folder with neither is not a
        version (a publish that did not finish); LATEST, temporary and foreign files are not either."""
        ndir = self.root.join(name)
        found: dict[str, Location] = {}
        folders = []
        for loc in ndir.listdir():
            vid = version_id_of_manifest_file(loc.name)
            if vid is not None:
                found[vid] = loc
            elif _VERSION_DIR.fullmatch(loc.name):
                folders.append(loc)
        for vdir in folders:
            if vdir.name not in found and legacy_manifest_location(vdir).exists():
                found[vdir.name] = legacy_manifest_location(vdir)
        return dict(sorted(found.items()))

    def open_manifest(self, vdir: Location, name: str, mloc: Location | None = None) -> Manifest:
        """The manifest of `<root>/<name>/<id>/`, checked, and refused unless it names that name and id."""
        mloc = mloc or find_manifest(vdir)
        if mloc is None:
            raise ManifestError(f"{manifest_location(vdir).uri}: no such manifest; {name}/{vdir.name[:12]} is "
                                "not a published version")
        m = Manifest.from_json(mloc.read_bytes(), where=mloc.uri)
        if m.name != name or m.version_id != vdir.name:
            raise ManifestError(f"{mloc.uri}: the manifest is for {m.name}@{m.version_id[:12]} but lies in "
                                f"{name}/{vdir.name[:12]}; a version directory was copied or renamed by hand")
        return m

    def resolve(self, ref: str) -> DatasetVersion:
        """Open a version by `name` (the one published last), `name@idprefix` or a bare id prefix."""
        if not isinstance(ref, str) or not ref.strip():
            raise ManifestError("an empty dataset reference names no version; give `name`, `name@id` or an id prefix")
        name, at, prefix = ref.partition("@")
        if at:
            validate_name(name, where=f"dataset reference {ref!r}", allow_rejects=True)
            if not _HEX_PREFIX.fullmatch(prefix):
                raise ManifestError(f"dataset reference {ref!r}: after '@' comes a version id prefix "
                                    "(hex digits), e.g. docs@3fa2")
        elif name not in self.names():
            if not _HEX_PREFIX.fullmatch(ref):
                close = difflib.get_close_matches(ref, self.names(), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else " (see `cidermill data ls`)"
                raise ManifestError(f"no dataset version matches {ref!r} under {self.root.uri}: no dataset has "
                                    f"that name and it is not an id prefix{hint}")
            name, prefix = "", ref
        if name and not prefix:
            latest = self._latest(name)
            if latest is not None:
                return latest
        skipped: list[SkippedManifest] = []
        candidates = self.versions(name or None, skipped=skipped)
        if prefix:
            candidates = [e for e in candidates if e.version_id.startswith(prefix)]
        if not candidates:
            why = ""
            if skipped:
                why = (f"; {len(skipped)} manifest(s) there do not check, e.g. {skipped[0].uri}: "
                       f"{skipped[0].reason}")
            raise ManifestError(f"no dataset version matches {ref!r} under {self.root.uri}{why or ' (see `cidermill data ls`)'}")
        if prefix and len({e.version_id for e in candidates}) > 1:
            ids = ", ".join(f"{e.name}@{e.version_id[:12]}" for e in candidates[:5])
            raise ManifestError(f"{ref!r} is ambiguous: {ids}; give a longer id prefix")
        return DatasetVersion(candidates[-1].location)

    def _latest(self, name: str) -> DatasetVersion | None:
        """The version `<root>/<name>/LATEST` names, once checked: a version id of this name, here. An edited
        LATEST (a path, `..`, another name's id) is refused rather than followed."""
        latest = self.root.join(name, LATEST)
        if not latest.exists():
            return None
        raw = latest.read_bytes()[:200]
        text = raw.decode("utf-8", "replace").strip()
        if not _VERSION_DIR.fullmatch(text):
            raise ManifestError(f"{latest.uri} holds {text[:80]!r}, not a version id; it was edited by hand: write "
                                "the id of a version of this name into it, or delete it to use the newest version")
        vdir = self.root.join(name, text)
        mloc = find_manifest(vdir)
        if mloc is None:
            raise ManifestError(f"{latest.uri} names {text[:12]}, which is not a version of {name!r} under "
                                f"{self.root.uri}; delete it to use the newest version")
        return DatasetVersion(vdir, manifest=self.open_manifest(vdir, name, mloc))

    # ---- publishing ---------------------------------------------------------------------
    def staging_dir(self, name: str, run_key: str) -> Location:
        return self.root.join(STAGING, f"{name}-{run_key[:16]}")

    def publish(self, staging: Location, manifest: Manifest, *, cleanup: bool = True,
                rejects: Manifest | None = None, lock_wait_s: float | None = None) -> DatasetVersion:
        """Move finished shards from `staging` into `<root>/<name>/<id>/`, manifest last.

        With `rejects`, that version (shards in the same staging dir) is placed first, marked
        `rejects_of` this one, so both appear in the catalog when this manifest is written.
        Publishing the same content twice is a no-op that returns the existing version.
        Holds the publish lock of the name (`rejects` share it). If it fails (a full disk, a
        kill), no version appears, no temporary file is left and the shards go back to `staging`.
        `cleanup` deletes the staging directory afterwards.
        """
        validate_name(manifest.name, where="publish", allow_rejects=True)
        base = manifest.name.removesuffix(REJECTS_SUFFIX)
        with Lock(self.root, f"publish-{base}", what=f"publishing {base!r} under {self.root.uri}",
                  wait_s=lock_wait_s):
            for m in ([rejects] if rejects is not None else []) + [manifest]:
                self._clear_leftovers(m.name, keep=m.version_id)
            if rejects is not None:
                rejects.extra["rejects_of"] = f"{manifest.name}@{manifest.version_id}"
                self._place(staging, rejects)
                manifest.extra["rejects_version"] = rejects.version_id
            version = self._place(staging, manifest)  # the commit point
            for m in ([rejects] if rejects is not None else []) + [manifest]:
                self._set_latest(m)
        if cleanup:
            try:
                staging.delete()
            except OSError as exc:  # published already; a leftover staging dir is harmless
                log.warning("could not delete %s: %s", staging.uri, exc)
        return version

    def _place(self, staging: Location, manifest: Manifest) -> DatasetVersion:
        target = self.root.join(manifest.name, manifest.version_id)
        if find_manifest(target) is not None:
            existing = DatasetVersion(target)
            if not self._owner_published(existing.manifest) and manifest.extra.get("rejects_of"):
                # same rejects content, but published for a run that never finished: adopt it
                existing.manifest.extra["rejects_of"] = manifest.extra["rejects_of"]
                self._rewrite_manifest(target, existing.manifest.to_json().encode())
            return DatasetVersion(target)
        mloc = manifest_location(target)
        moved: list[tuple[Location, Location]] = []
        try:
            target.mkdir()
            for shard in manifest.shards:
                dst = target.join(shard.path)
                Location(dst.fs, dst.path.rsplit("/", 1)[0]).mkdir()
                src = staging.join(shard.path)
                src.move_to(dst)
                moved.append((src, dst))
            if not manifest.created_at:
                manifest.created_at = utc_now()
            mloc.write_bytes_atomic(manifest.to_json().encode())
        except BaseException:
            for src, dst in reversed(moved):  # renames need no space: put the shards back
                try:
                    dst.move_to(src)
                except OSError:
                    pass
            try:
                if not mloc.exists():
                    target.delete()
            except OSError:
                pass
            raise
        return DatasetVersion(target)

    def _clear_leftovers(self, name: str, *, keep: str) -> None:
        """What a publish killed midway left under `<root>/<name>/`: temporary files (`LATEST.tmp-…`,
        `<id>.manifest.json.tmp-…`) and version directories without a manifest (shards moved, manifest never
        written; such a directory is not a version; a manifest inside it, the older layout, counts). Called
        under the name's publish lock, so no other publish is writing there. `keep` (the version about to be placed) keeps its shards: only its
        temporary files go, and its shards are overwritten by the move."""
        ndir = self.root.join(name)
        published = self._manifests_of(name)
        for loc in ndir.listdir():
            if ".tmp-" in loc.name:
                _delete_quietly(loc)
            elif not _VERSION_DIR.fullmatch(loc.name):
                continue
            elif loc.name in published or loc.name == keep:
                if self.root.is_local:  # older layout: `manifest.json.tmp-…` inside the folder
                    for sub in (loc, loc.join("shards")):
                        for fname in sub.file_sizes():
                            if ".tmp-" in fname:
                                _delete_quietly(sub.join(fname))
            else:
                log.warning("removing %s: a version directory without a manifest (a publish that did not "
                            "finish)", loc.uri)
                _delete_quietly(loc)

    def _set_latest(self, manifest: Manifest) -> None:
        latest = self.root.join(manifest.name, LATEST)
        try:
            latest.write_bytes_atomic(manifest.version_id.encode())
        except OSError as exc:
            # The version is published; without LATEST, `resolve(name)` picks the newest one,
            # which is this one. A stale LATEST would name an older one, so remove it.
            log.warning("could not update %s (%s); removing it", latest.uri, exc)
            try:
                latest.delete()
            except OSError:
                pass

    def sign(self, ref: str) -> DatasetVersion:
        """Sign a version's manifest with the configured key (signing.py) after checking every shard against
        it: the one way to bring a version published before the key into a catalog that checks signatures."""
        name, _, prefix = ref.partition("@")
        validate_name(name, where=f"dataset reference {ref!r}", allow_rejects=True)
        matches = [(vid, mloc) for vid, mloc in self._manifests_of(name).items() if vid.startswith(prefix)]
        if len(matches) != 1:
            raise ManifestError(f"{ref!r} matches {len(matches)} versions of {name!r}; give an id prefix that names one")
        vid, mloc = matches[0]
        vdir = self.root.join(name, vid)
        manifest = Manifest.from_json(mloc.read_bytes(), where=mloc.uri, check_signature=False)
        if manifest.name != name or manifest.version_id != vdir.name:
            raise ManifestError(f"{mloc.uri}: the manifest is for {manifest.name}@{manifest.version_id[:12]}; "
                                "not signing a version directory that was copied or renamed")
        problems = DatasetVersion(vdir, manifest=manifest).verify()
        if problems:
            raise ManifestError(f"{vdir.uri}/{problems[0].path}: {problems[0].reason}; not signing a broken version")
        base = name.removesuffix(REJECTS_SUFFIX)
        with Lock(self.root, f"publish-{base}", what=f"signing {name!r} under {self.root.uri}"):
            manifest.schema_version = max(manifest.schema_version, 2)
            self._rewrite_manifest(vdir, manifest.to_json().encode())
        return DatasetVersion(vdir)

    @staticmethod
    def _rewrite_manifest(vdir: Location, data: bytes) -> None:
        """Replace a published version's manifest; it goes beside the folder (a manifest of the older layout
        inside it is removed once the new one is written, so one of the two exists at every moment)."""
        manifest_location(vdir).write_bytes_atomic(data)
        legacy = legacy_manifest_location(vdir)
        if legacy.exists():
            _delete_quietly(legacy)

    def migrate_layout(self, *, dry_run: bool = False) -> list[str]:
        """Move every manifest of the older layout (`<id>/manifest.json`) beside its folder
        (`<id>.manifest.json`), byte for byte: ids, digests and signatures stay as they were, and the folder
        then reads as a Parquet dataset. Under each name's publish lock; the new manifest is written
        (atomically) before the old one is removed, so the version never disappears. Returns the
        `name@id12` of each version moved (or, with `dry_run`, to be moved)."""
        moved = []
        for name in self.names():
            base = name.removesuffix(REJECTS_SUFFIX)
            with Lock(self.root, f"publish-{base}", what=f"migrating {name!r} under {self.root.uri}"):
                for vid, mloc in self._manifests_of(name).items():
                    if mloc.name != LEGACY_MANIFEST_NAME:
                        continue
                    moved.append(f"{name}@{vid[:12]}")
                    if not dry_run:
                        self._rewrite_manifest(self.root.join(name, vid), mloc.read_bytes())
        return moved

    def _owner_published(self, manifest: Manifest) -> bool:
        owner = manifest.extra.get("rejects_of")
        if not owner:
            return True
        name, _, vid = str(owner).partition("@")
        return find_manifest(self.root.join(name, vid)) is not None

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
        validate_name(name, where="write_table", allow_rejects=True)
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
