"""Real documents for the web-stage tests: C4 text, Readability pages, the bundled WARCs."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "data" / "samples"
SHARED = Path(os.environ.get("CIDERMILL_SHARED_DATA", REPO.parent / "shared" / "data"))
READABILITY = SHARED / "web_extraction" / "mozilla_readability" / "test-pages"


def c4_texts() -> list[str]:
    with gzip.open(SAMPLES / "c4" / "c4_demo.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def warc_rows() -> pa.Table:
    """Every HTML response of the bundled WARCs, through the project's WARC reader."""
    from corpus.readers import make_reader
    from corpus.readers.base import InputFile
    from manifests.storage import Location

    reader = make_reader("warc", {"record_types": ["response"]})
    tables = []
    for path in sorted(SAMPLES.glob("*_warc/*.warc.gz")):
        source = InputFile(Location.parse(str(path)), path.name)
        tables += list(reader.read(source, batch_rows=1000, on_record_error=lambda e: None))
    return pa.concat_tables(tables)


@pytest.fixture(scope="session")
def readability_dir(shared_data) -> Path:
    return shared_data / "web_extraction" / "mozilla_readability" / "test-pages"


def table_of(texts: list[str], **columns) -> pa.Table:
    return pa.table({"id": [f"d{i}" for i in range(len(texts))], "text": pa.array(texts, pa.string()), **columns})
