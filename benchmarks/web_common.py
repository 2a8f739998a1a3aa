"""Shared by the web benchmarks: the real pages they run on, and a runner that measures one side
in a child process (so each side's peak memory is its own), on one core."""

from __future__ import annotations

import gzip
import json
import multiprocessing as mp
import os
import resource
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CIDERMILL_SHARED_DATA", REPO.parent / "shared" / "data"))


def warc_files() -> list[Path]:
    files = sorted((REPO / "data" / "samples").glob("*_warc/*.warc.gz"))
    extra = [SHARED / "warc" / "resiliparse" / "warcfile.warc.gz", SHARED / "warc" / "resiliparse" / "clueweb-quirk.warc.gz",
             SHARED / "warc" / "whirlwind_cc2024_22" / "whirlwind.warc.gz"]
    return files + [p for p in extra if p.is_file()]


def html_pages() -> list[tuple[bytes, str | None, str | None]]:
    """(payload, Content-Type, url): the Readability gold pages and every HTML response of the WARCs."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    pages = []
    gold = SHARED / "web_extraction" / "mozilla_readability" / "test-pages"
    if gold.is_dir():
        pages += [((p / "source.html").read_bytes(), "text/html", None) for p in sorted(gold.iterdir())
                  if (p / "source.html").is_file()]
    for path in warc_files():
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f, record_types=WarcRecordType.response, parse_http=True):
                ctype = rec.http_headers.get("Content-Type") if rec.http_headers else None
                body = rec.reader.read()
                if body and "html" in (ctype or "html").lower():
                    pages.append((body, ctype, rec.headers.get("WARC-Target-URI")))
    return pages


def c4_texts() -> list[str]:
    with gzip.open(REPO / "data" / "samples" / "c4" / "c4_demo.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def _child(fn, args, queue, warmup):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    if warmup is not None:
        fn(*warmup)  # imports and first-call set-up are not throughput
    start = time.perf_counter()
    result = fn(*args)
    seconds = time.perf_counter() - start
    queue.put((seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, result))


def measure(fn, *args, warmup: tuple | None = None, repeats: int = 1):
    """(seconds, peak RSS MiB, fn's result) of fn(*args) in a forked child pinned to one core,
    after an untimed fn(*warmup). With repeats > 1, each repeat is a fresh child (no warm caches)
    and the fastest is kept: the machine is shared, and the minimum is the least disturbed run."""
    ctx = mp.get_context("fork")
    best = None
    for _ in range(repeats):
        queue = ctx.Queue()
        proc = ctx.Process(target=_child, args=(fn, args, queue, warmup))
        proc.start()
        out = queue.get()
        proc.join()
        if best is None or out[0] < best[0]:
            best = out
    return best


def report(title: str, unit: str, n: int, ours: tuple, peer: tuple, ours_name: str, peer_name: str) -> None:
    (s1, m1, _), (s2, m2, _) = ours, peer
    print(f"\n{title} ({n} items, one core, same data, one run)")
    print(f"  {ours_name:38s} {n / s1:10.1f} {unit}/s   peak RSS {m1:7.0f} MiB")
    print(f"  {peer_name:38s} {n / s2:10.1f} {unit}/s   peak RSS {m2:7.0f} MiB")
    print(f"  ratio ours/peer: {s2 / s1:.1f}x")
