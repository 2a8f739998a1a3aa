"""The project's shared reference data, for evaluations, benchmarks and tests only.

Product code (manifests/ corpus/ synth/ training/) never reads it: what a stage needs ships with the
package. Evaluations score against real held-out data that is too large or not licensed to ship; it
sits beside the clone at `../shared/data` on development and CI machines, or wherever
CIDERMILL_SHARED_DATA points.
"""

from __future__ import annotations

import os
from pathlib import Path

from manifests.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


def shared_root() -> Path:
    return Path(os.environ.get("CIDERMILL_SHARED_DATA") or REPO.parent / "shared" / "data")


def shared_data(*parts: str) -> Path:
    path = shared_root().joinpath(*parts)
    if not path.exists():
        raise ConfigError(f"shared data {path} not found; set CIDERMILL_SHARED_DATA to the folder that holds "
                          f"benchmarks/, licenses/, web_text/ ... (the evaluations' data)")
    return path
