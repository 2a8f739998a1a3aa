"""Where the shared reference data and the project's caches live.

The shared data sits beside the clone at `../shared/data` (CIDERMILL_SHARED_DATA overrides it); the
license matcher does not use it (its data is the `licensedcode-data` package, see license_index.py). Generated indexes go to CIDERMILL_CACHE (default
~/.cache/cidermill), keyed by a hash of their inputs so a changed input rebuilds them.
"""

from __future__ import annotations

import os
from pathlib import Path

from manifests.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def shared_data(*parts: str) -> Path:
    base = Path(os.environ.get("CIDERMILL_SHARED_DATA", REPO.parent / "shared" / "data"))
    path = base.joinpath(*parts)
    if not path.exists():
        raise ConfigError(f"shared data {path} not found; set CIDERMILL_SHARED_DATA to the folder "
                          f"that holds licenses/ and math_web/")
    return path


def cache_dir(*parts: str) -> Path:
    base = Path(os.environ.get("CIDERMILL_CACHE", Path.home() / ".cache" / "cidermill"))
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
