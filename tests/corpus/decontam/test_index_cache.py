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
    index, data = _cached(builds)
    assert len(builds) == 1
    (entry,) = cache.glob("*.npz")
    assert entry.read_bytes() == data
    _same(index, reference)

    index, _ = _cached(builds)   # read back, not built
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
        index, data = _cached(builds)
        _same(index, reference)
        assert NgramIndex.from_bytes(entry.read_bytes()).benchmarks == NAMES   # replaced by a good one
    assert len(builds) == 6


def test_other_settings_or_data_are_another_entry(cache, monkeypatch):
    builds: list = []
    _cached(builds)
    index, _ = _cached(builds, min_n=9)
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
    index, _ = _cached(builds)
    _same(index, _fresh())
    assert not list(cache.glob("*"))


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
