"""The decontamination index is cached by its inputs; a cached index equals a fresh build, a bad cache file is
built again and replaced, and other inputs or settings are another cache entry."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from corpus.decontam import index_cache
from corpus.decontam.benchmarks import load_items
from corpus.decontam.index import NgramIndex
from corpus.dedup.ngrams import tokenize

NAMES = ["gsm8k", "triviaqa"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CIDERMILL_CACHE", str(tmp_path))
    monkeypatch.delenv("CIDERMILL_BENCHMARKS", raising=False)
    return tmp_path / "decontam-index"


def _fresh(min_n=8, max_n=13) -> NgramIndex:   # the reference: built directly, never through the cache
    return NgramIndex.build({n: load_items(n) for n in NAMES}, min_n=min_n, max_n=max_n)


def _same(a: NgramIndex, b: NgramIndex) -> None:
    assert a.ns.tolist() == b.ns.tolist()
    for name in ("hashes", "segment", "start"):
        for x, y in zip(getattr(a, name), getattr(b, name), strict=True):
            assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert np.array_equal(a.seg_item, b.seg_item) and np.array_equal(a.item_benchmark, b.item_benchmark)
    assert (a.item_ids, a.benchmarks, a.segments) == (b.item_ids, b.benchmarks, b.segments)


def _cached(builds: list, min_n=8, max_n=13):
    def build():
        builds.append(1)
        return _fresh(min_n, max_n)
    return index_cache.cached_index(NAMES, None, min_n=min_n, max_n=max_n, build=build)


def test_cached_index_equals_a_fresh_build_and_a_bad_cache_is_rebuilt(cache):
    reference = _fresh()
    builds: list = []
    index, data, stored = _cached(builds)
    assert len(builds) == 1
    (entry,) = cache.glob("*.npz")
    assert entry.read_bytes() == data and stored.path == entry
    _same(index, reference)

    index, _, _ = _cached(builds)   # read back, not built
    assert len(builds) == 1
    _same(index, reference)
    doc, k, pos = index.find(tokenize(pa.array([load_items("gsm8k")[3].segments[0]])))   # it still finds items
    assert index.describe(int(index.key(k, pos)[0]))["item"] == load_items("gsm8k")[3].item_id

    good = entry.read_bytes()
    unsorted = NgramIndex.from_bytes(good)
    unsorted.hashes[0] = unsorted.hashes[0][::-1].copy()   # readable, but not a searchable index
    other = NgramIndex.from_bytes(good)
    other.benchmarks = ["gsm8k", "mbpp"]                      # readable, but of other benchmarks
    for bad in (good[: len(good) // 2], b"", b"not a zip", unsorted.to_bytes(), other.to_bytes()):
        entry.write_bytes(bad)
        index, data, _ = _cached(builds)
        _same(index, reference)
        assert NgramIndex.from_bytes(entry.read_bytes()).benchmarks == NAMES   # replaced by a good one
    assert len(builds) == 6


def test_other_settings_or_data_are_another_entry(cache, monkeypatch):
    builds: list = []
    _cached(builds)
    index, _, _ = _cached(builds, min_n=9)
    assert len(builds) == 2 and len(list(cache.glob("*.npz"))) == 2
    _same(index, _fresh(min_n=9))
    key = index_cache.cache_key(NAMES, None, min_n=8, max_n=13)
    monkeypatch.setattr(index_cache, "data_sha256", lambda name, folder: "changed")
    assert index_cache.cache_key(NAMES, None, min_n=8, max_n=13) != key


def test_an_unwritable_cache_still_gives_the_index(cache, monkeypatch):
    def refuse(self, data):
        raise PermissionError("read-only")
    monkeypatch.setattr(index_cache.Path, "write_bytes", refuse)
    builds: list = []
    index, _, entry = _cached(builds)
    _same(index, _fresh())
    assert not list(cache.glob("*")) and entry is None   # nothing for the workers to read: the stage saves a copy


def test_item_counts_are_counted_once_per_data_and_equal_reading_every_item(cache, tmp_path):
    from corpus.decontam.benchmarks import cached_count, data_info, raw_items

    calls = []

    def count(name):
        def run():
            calls.append(name)
            return sum(1 for _ in raw_items(name))
        return run

    expected = {n: sum(1 for _ in raw_items(n)) for n in NAMES}  # the reference: every item read here
    assert {n: cached_count(n, None, count(n)) for n in NAMES} == expected
    assert {n: cached_count(n, None, count(n)) for n in NAMES} == expected
    assert calls == NAMES  # the second time from the cache
    for entry in (tmp_path / "decontam-items").iterdir():
        entry.write_text("12x")  # not a count: counted again
    assert {n: cached_count(n, None, count(n)) for n in NAMES} == expected and calls == NAMES * 2
    data_info.cache_clear()
    assert [data_info(n)["items"] for n in NAMES] == [expected[n] for n in NAMES]


def _config():
    from corpus.stages.decontam import DecontamConfig

    return DecontamConfig(benchmarks=NAMES)


def test_a_worker_reads_the_drivers_cache_file_and_reads_through_the_cache_when_it_changed(cache):
    """corpus/stages/decontam.py: workers read the cache file the driver read (no staged copy), but only while it
    is that very file and a valid index; a file removed, replaced or damaged since is read through the cache
    again (rebuilt when bad), which gives the same index."""
    import os

    from corpus.stages.decontam import build_index, load_from_cache
    from manifests.storage import Location

    reference = _fresh()
    index, data, entry = build_index(_config())
    loc = Location.parse(str(entry.path))
    _same(index_cache.read_entry(entry, NAMES, min_n=8, max_n=13), reference)
    _same(load_from_cache(loc, cfg=_config(), entry=entry), reference)

    good = entry.path.read_bytes()
    replaced = entry.path.with_name("other.npz")
    replaced.write_bytes(good)
    os.replace(replaced, entry.path)   # the same bytes, but another file: not the one the driver checked
    assert index_cache.read_entry(entry, NAMES, min_n=8, max_n=13) is None
    _same(load_from_cache(loc, cfg=_config(), entry=entry), reference)

    with open(entry.path, "r+b") as f:   # damaged in place (no cache writer does this)
        f.truncate(len(good) // 2)
    fresh = index_cache.CacheEntry(entry.path, index_cache._identity(entry.path.stat()))
    assert index_cache.read_entry(fresh, NAMES, min_n=8, max_n=13) is None   # identity matches, the zip does not
    _same(load_from_cache(loc, cfg=_config(), entry=fresh), reference)     # rebuilt ...
    assert entry.path.read_bytes() == good                                  # ... and the cache entry replaced

    entry.path.unlink()
    _same(load_from_cache(loc, cfg=_config(), entry=fresh), reference)
    assert entry.path.read_bytes() == good


def _build_in_child(barrier, out):
    from corpus.stages.decontam import build_index

    import hashlib

    barrier.wait(timeout=120)
    index, _, entry = build_index(_config())
    out.put((hashlib.sha256(index.to_bytes()).hexdigest(), None if entry is None else str(entry.path)))


def test_concurrent_runs_building_the_same_index_each_get_it_and_leave_a_valid_entry(cache):
    """Two runs that find no cache entry build at once: each gets the same index, and the entry left is valid;
    a run whose own stored file was replaced by the other's does not hand that file to its workers unchecked."""
    import multiprocessing as mp

    import hashlib

    ctx = mp.get_context("spawn")   # not fork: polars' thread pool does not survive it
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_build_in_child, args=(barrier, out)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    reference = _fresh()
    (entry,) = cache.glob("*")   # no temporary file left beside it
    assert [digest for digest, _ in results] == [hashlib.sha256(reference.to_bytes()).hexdigest()] * 2
    assert all(path in (None, str(entry)) for _, path in results)
    _same(NgramIndex.from_bytes(entry.read_bytes()), reference)


def test_the_stage_stages_no_index_copy_when_the_cache_holds_it_and_finds_the_same_rows(cache, tmp_path, monkeypatch,
                                                                                        c4_docs):
    """decontaminate_v1's build with two worker processes: with a cache, no `index.npz` in the work folder;
    with an unwritable cache, the copy as before; the same contaminated rows either way."""
    from corpus.dedup.spill import read_table
    from corpus.executors.local import LocalTaskMap
    from corpus.registry import stage_class

    folder = tmp_path / "shards"
    folder.mkdir()
    docs = [d["text"] for d in c4_docs[:40]]
    gsm = load_items("gsm8k")
    docs[5] += "\n\n" + gsm[41].segments[0]
    docs[30] = gsm[7].segments[0] + " " + docs[30]
    shards = []
    for i, part in enumerate((docs[:20], docs[20:])):
        path = folder / f"s{i}.parquet"
        import pyarrow.parquet as pq
        pq.write_table(pa.table({"id": [f"d{i * 20 + j}" for j in range(len(part))], "text": part}), path)
        shards.append(str(path))
    stage = stage_class("decontaminate_v1")({"benchmarks": NAMES})

    def contaminated(work):
        state = stage.build(shards, workdir=str(work), tasks=LocalTaskMap(2))
        return pa.concat_tables([read_table(s) for s in state]).to_pylist()

    cached = contaminated(tmp_path / "w1")
    assert not (tmp_path / "w1" / "decontam" / "index.npz").exists()
    assert [r["id"] for r in cached] == ["d5", "d30"] and {r["benchmark"] for r in cached} == {"gsm8k"}

    monkeypatch.setenv("CIDERMILL_CACHE", str(tmp_path / "elsewhere"))

    def refuse(self, data):
        raise PermissionError("read-only")
    monkeypatch.setattr(index_cache.Path, "write_bytes", refuse)
    assert contaminated(tmp_path / "w2") == cached
    assert (tmp_path / "w2" / "decontam" / "index.npz").stat().st_size > 1_000_000
