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


def cached_index(names: list[str], folder: Path | None, *, min_n: int, max_n: int,
                 build: Callable[[], NgramIndex]) -> tuple[NgramIndex, bytes]:
    """(index, its `.npz` bytes): read from the cache when a valid entry exists, else `build()` and cache it."""
    from ..code.paths import cache_dir, store_cache_entry

    path = cache_dir("decontam-index") / f"{cache_key(names, folder, min_n=min_n, max_n=max_n)}.npz"
    try:
        data = path.read_bytes()
        index = NgramIndex.from_bytes(data)
        if well_formed(index, names, min_n=min_n, max_n=max_n):
            return index, data
        log.warning("decontam index cache %s is not a valid index of %s; building it again", path, ", ".join(names))
    except FileNotFoundError:
        pass
    except Exception as exc:  # noqa: BLE001 -- a truncated zip or pickle fails in many ways; all mean "rebuild"
        log.warning("decontam index cache %s is unreadable (%s); building it again", path, exc)
    index = build()
    data = index.to_bytes()
    store_cache_entry(path, lambda tmp: tmp.write_bytes(data))
    return index, data
