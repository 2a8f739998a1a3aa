"""The benchmark n-gram index, built once per set of inputs and cached under CIDERMILL_CACHE.

Building the index over every default benchmark (~42k items: reading the bundled files, tokenising, hashing,
sorting) costs ~2.4 CPU-s, the same in every run with the same benchmarks and settings. So the built index is
kept as `<CIDERMILL_CACHE>/decontam-index/<key>.npz`, the key a sha256 of everything the index is made from:
the benchmarks' names, in order, and the bytes of their data files; `min_n` and `max_n`; the source of the
code that reads, cleans, tokenises and hashes them; and the polars, pyarrow and numpy versions (a token's hash
is polars' hash, stable only within one polars version; pyarrow's Unicode functions simplify the text). Any change to those is another key, so a stale index is
never read. A cache file that does not read back as a well-formed index of those benchmarks (truncated,
overwritten, from another writer) is built again and replaced; a cache that cannot be written only costs the
next run the build.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .benchmarks import data_sha256, source
from .index import NgramIndex

log = logging.getLogger("cidermill.decontam")
_HERE = Path(__file__).resolve().parent
# every file whose code decides the index's arrays
CODE = (_HERE / "benchmarks.py", _HERE / "index.py", _HERE.parent / "dedup" / "ngrams.py")


def cache_key(names: list[str], folder: Path | None, *, min_n: int, max_n: int) -> str:
    import polars
    import pyarrow

    h = hashlib.sha256(f"decontam-index 1\0{min_n}\0{max_n}\0{polars.__version__}\0{pyarrow.__version__}\0"
                       f"{np.__version__}\0".encode())
    for f in CODE:
        h.update(f.read_bytes())
    for name in names:
        h.update(f"\0{name}\0{source(name, folder)}\0{data_sha256(name, folder)}".encode())
    return h.hexdigest()[:32]


def well_formed(index: NgramIndex, names: list[str], *, min_n: int, max_n: int) -> bool:
    """Whether `index` is an index of `names` that `find` and `describe` can use without an out-of-range
    lookup: per n, sorted distinct hashes with a segment and start each; every segment, item and benchmark
    reference in range."""
    k = len(index.ns)
    if (index.benchmarks != list(names) or len(index.hashes) != k or len(index.segment) != k or len(index.start) != k
            or (k and (index.ns.min() < min_n or index.ns.max() > max_n or np.any(np.diff(index.ns) <= 0)))):
        return False
    n_seg, n_items = len(index.segments), len(index.item_ids)
    if len(index.seg_item) != n_seg or len(index.item_benchmark) != n_items:
        return False
    for h, seg, start in zip(index.hashes, index.segment, index.start):
        if (h.dtype != np.uint64 or h.ndim != 1 or len(seg) != len(h) or len(start) != len(h)
                or np.any(h[1:] <= h[:-1]) or (len(seg) and (seg.min() < 0 or seg.max() >= n_seg))
                or (len(start) and start.min() < 0)):
            return False
    return bool((n_seg == 0 or (index.seg_item.min() >= 0 and index.seg_item.max() < n_items))
                and (n_items == 0 or (index.item_benchmark.min() >= 0
                                      and index.item_benchmark.max() < len(index.benchmarks))))


@dataclass(frozen=True)
class CacheEntry:
    """The cache file an index was read from or stored to, and which file it was (inode, size, mtime): a cache
    entry is only ever replaced, never written in place, so another process that opens `path` and finds the
    same identity reads the very bytes this process read or wrote."""
    path: Path
    identity: tuple[int, int, int]

    def matches(self, fd: int) -> bool:
        return _identity(os.fstat(fd)) == self.identity


def _identity(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_ino, st.st_size, st.st_mtime_ns


def cached_index(names: list[str], folder: Path | None, *, min_n: int, max_n: int,
                 build: Callable[[], NgramIndex]) -> tuple[NgramIndex, bytes, CacheEntry | None]:
    """(index, its `.npz` bytes, the cache entry holding exactly those bytes or None when the cache could not
    be written): read from the cache when a valid entry exists, else `build()` and cache it."""
    from ..code.paths import cache_dir, store_cache_entry

    path = cache_dir("decontam-index") / f"{cache_key(names, folder, min_n=min_n, max_n=max_n)}.npz"
    try:
        with open(path, "rb") as f:
            entry = CacheEntry(path, _identity(os.fstat(f.fileno())))
            data = f.read()
        index = NgramIndex.from_bytes(data)
        if well_formed(index, names, min_n=min_n, max_n=max_n):
            return index, data, entry
        log.warning("decontam index cache %s is not a valid index of %s; building it again", path, ", ".join(names))
    except FileNotFoundError:
        pass
    except Exception as exc:  # noqa: BLE001 -- a truncated zip or pickle fails in many ways; all mean "rebuild"
        log.warning("decontam index cache %s is unreadable (%s); building it again", path, exc)
    index = build()
    data = index.to_bytes()
    stored: list[CacheEntry] = []

    def write(tmp: Path) -> None:
        tmp.write_bytes(data)
        stored.append(CacheEntry(path, _identity(tmp.stat())))  # os.replace keeps the inode and times

    store_cache_entry(path, write)
    try:  # stored, and not replaced since (by a concurrent run's own build of the same index)
        entry = stored[0] if stored and _identity(path.stat()) == stored[0].identity else None
    except OSError:
        entry = None
    return index, data, entry


def read_entry(entry: CacheEntry, names: list[str], *, min_n: int, max_n: int) -> NgramIndex | None:
    """The index in `entry`, for another process of the same run: None when the file is gone, replaced since
    the driver read it (another identity), or does not read back as a valid index of `names`."""
    try:
        with open(entry.path, "rb") as f:
            if not entry.matches(f.fileno()):
                return None
            data = f.read()
        index = NgramIndex.from_bytes(data)
    except Exception as exc:  # noqa: BLE001 -- missing, truncated: the caller reads through the cache again
        log.warning("decontam index cache %s could not be read (%s)", entry.path, exc)
        return None
    return index if well_formed(index, names, min_n=min_n, max_n=max_n) else None
