"""WARC reading: the project's reader (corpus/readers/warc.py: FastWARC records -> Arrow tables
with id, url, HTTP status, content type and payload; truncation detected) vs FastWARC's raw
iteration reading each response payload, on the same file: the bundled and shared real WARCs
concatenated N times (gzip members concatenate) into one temporary .warc.gz.

    .venv/bin/python benchmarks/web_warc.py [--repeat 40]
"""

from __future__ import annotations

import argparse
import os
import tempfile

from web_common import measure, report, warc_files


def ours(path: str) -> int:
    from corpus.readers import make_reader
    from corpus.readers.base import InputFile
    from manifests.storage import Location

    reader = make_reader("warc", {"record_types": ["response"]})
    source = InputFile(Location.parse(path), os.path.basename(path))
    return sum(t.num_rows for t in reader.read(source, batch_rows=256, on_record_error=lambda e: None))


def peer(path: str) -> int:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    n = 0
    with open(path, "rb") as f:
        for record in ArchiveIterator(f, record_types=WarcRecordType.response, parse_http=True):
            record.reader.read()
            n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=40, help="copies of the WARCs in the test file")
    parser.add_argument("--repeats", type=int, default=2, help="fresh runs per side; the fastest counts")
    args = parser.parse_args()
    files = [p for p in warc_files() if "clueweb" not in p.name]  # that one has quirks, not speed
    blob = b"".join(p.read_bytes() for p in files)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.warc.gz")
        with open(path, "wb") as f:
            for _ in range(args.repeat):
                f.write(blob)
        size_mb = os.path.getsize(path) / 1e6
        o = measure(ours, path, warmup=(path,), repeats=args.repeats)
        p = measure(peer, path, warmup=(path,), repeats=args.repeats)
    assert o[2] == p[2], (o[2], p[2])
    report(f"WARC response records ({size_mb:.0f} MB gzip)", "records", o[2], o, p,
           "ours: WarcReader -> Arrow tables", "fastwarc ArchiveIterator (raw)")


if __name__ == "__main__":
    main()
