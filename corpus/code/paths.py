"""Where the project's caches live, and (for the license index only, until its data ships) the
shared reference data.

Generated indexes go to CIDERMILL_CACHE (default ~/.cache/cidermill), keyed by a hash of their
inputs so a changed input rebuilds them.

`shared_data` is kept ONLY for corpus/code/license_index.py's default (ScanCode's license texts under
../shared/data/licenses, or CIDERMILL_SHARED_DATA); that index is moving to a registry package
(licensedcode-data) or bundled texts in its own issue. Nothing else in product code may use it:
evaluations, benchmarks and tests use evals/shared.py.
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
