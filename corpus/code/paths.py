"""Where the project's caches live.

Generated indexes (the license matcher's, built from the `licensedcode-data` package) go to
CIDERMILL_CACHE (default ~/.cache/cidermill), keyed by a hash of their inputs so a changed input rebuilds
them. Product code reads no data from outside the package and its registry dependencies; evaluations,
benchmarks and tests find the development data through evals/shared.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]


def cache_dir(*parts: str) -> Path:
    base = Path(os.environ.get("CIDERMILL_CACHE", Path.home() / ".cache" / "cidermill"))
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def store_cache_entry(path: Path, write: Callable[[Path], None]) -> None:
    """Put a cache entry in place whole: `write(tmp)` to a temporary file beside `path` (same suffix, so
    numpy's savers add none), then rename it over `path`, so a reader sees the old entry or the new one. A
    cache that cannot be written (read-only, full) only costs the next run the work again: the error is
    dropped with the temporary file."""
    tmp = path.with_name(f"{path.stem}.tmp-{os.getpid()}{path.suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
