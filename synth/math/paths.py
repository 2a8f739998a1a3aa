"""Where the shared real data lives: $CIDERMILL_SHARED_DATA, else ../shared/data beside the repo."""

from __future__ import annotations

import os
from pathlib import Path


def shared_data() -> Path:
    env = os.environ.get("CIDERMILL_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
