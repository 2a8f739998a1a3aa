"""store_cache_entry: a cache entry appears whole or not at all, and a failed write costs nothing but the entry."""

import numpy as np

from corpus.code.paths import store_cache_entry


def test_entry_written_whole_with_numpy_savers(tmp_path):
    store_cache_entry(tmp_path / "a.npy", lambda tmp: np.save(tmp, np.arange(3)))
    store_cache_entry(tmp_path / "count", lambda tmp: tmp.write_text("42"))
    assert np.load(tmp_path / "a.npy").tolist() == [0, 1, 2]
    assert (tmp_path / "count").read_text() == "42"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy", "count"]  # no temporary left, no suffix added


def test_failed_write_leaves_old_entry_and_no_temporary(tmp_path):
    (tmp_path / "count").write_text("7")

    def full_disk(tmp):
        tmp.write_text("4")  # partly written, then the disk is full
        raise OSError(28, "No space left on device")

    store_cache_entry(tmp_path / "count", full_disk)
    assert (tmp_path / "count").read_text() == "7"
    assert [p.name for p in tmp_path.iterdir()] == ["count"]
