"""Where a version's manifest lies relative to its folder.

    <root>/<name>/<version_id>/                 the data only (for datasets: Parquet shards and nothing else)
    <root>/<name>/<version_id>.manifest.json    the manifest, beside the folder, written last (the commit point)

The folder itself then reads as a Parquet dataset: polars `scan_parquet`, pandas `read_parquet`,
`pyarrow.dataset.dataset` and Hugging Face `load_dataset("parquet", data_dir=...)` take it as it is
(polars refuses a folder holding any file that is not Parquet, hidden ones too, so the manifest cannot
stay inside it under any name).

Catalogs written before this layout keep the manifest inside the folder (`<version_id>/manifest.json`);
they are still read (`find_manifest` falls back to it), and `cidermill data migrate` moves them.
"""

from __future__ import annotations

import re

from .manifest import MANIFEST_NAME
from .storage import Location

MANIFEST_SUFFIX = "." + MANIFEST_NAME  # `<version_id>.manifest.json`
LEGACY_MANIFEST_NAME = MANIFEST_NAME  # `<version_id>/manifest.json`, the layout before the manifest moved out
_MANIFEST_FILE = re.compile(r"([0-9a-f]{64})" + re.escape(MANIFEST_SUFFIX))


def manifest_location(version_dir: Location) -> Location:
    """Where the manifest of the version in `version_dir` is written: a file beside the folder."""
    parent, _, base = version_dir.path.rstrip("/").rpartition("/")
    return Location(version_dir.fs, parent or "/").join(base + MANIFEST_SUFFIX)


def legacy_manifest_location(version_dir: Location) -> Location:
    return version_dir.join(LEGACY_MANIFEST_NAME)


def find_manifest(version_dir: Location) -> Location | None:
    """The manifest of `version_dir`: beside it, else (a catalog of the older layout) inside it; None if
    neither exists (then it is not a version: a publish that did not finish, or a foreign folder)."""
    for loc in (manifest_location(version_dir), legacy_manifest_location(version_dir)):
        if loc.exists():
            return loc
    return None


def version_id_of_manifest_file(filename: str) -> str | None:
    """`<id>.manifest.json` -> id; anything else (LATEST, temporary files, foreign files) -> None."""
    m = _MANIFEST_FILE.fullmatch(filename)
    return m.group(1) if m else None
