"""Where the project's caches live.

Generated indexes (the license matcher's, built from the `licensedcode-data` package) go to
CIDERMILL_CACHE (default ~/.cache/cidermill), keyed by a hash of their inputs so a changed input rebuilds
them. Product code reads no data from outside the package and its registry dependencies; evaluations,
benchmarks and tests find the development data through evals/shared.py.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def cache_dir(*parts: str) -> Path:
    base = Path(os.environ.get("CIDERMILL_CACHE", Path.home() / ".cache" / "cidermill"))
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
