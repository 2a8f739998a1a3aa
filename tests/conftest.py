"""Shared fixtures: paths to bundled and shared real data, small real documents."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "data" / "samples"
FIXTURES = REPO / "tests" / "fixtures"
SHARED_DATA = Path(os.environ.get("CIDERMILL_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def c4_docs() -> list[dict]:
    """The 300 real C4 documents bundled with the demo."""
    with gzip.open(SAMPLES / "c4" / "c4_demo.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder not found at {SHARED_DATA} (set CIDERMILL_SHARED_DATA)")
    return SHARED_DATA


def write_jsonl(path: Path, records: list[dict], *, compress: str | None = None) -> Path:
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    if compress == "gz":
        data = gzip.compress(data)
    elif compress == "zst":
        import zstandard

        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)
    return path
