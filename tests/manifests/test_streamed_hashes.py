"""Issue 44: shards are hashed as they are written (manifests/hashing.py); every digest must still be
sha256 of exactly the bytes on disk, computed here with hashlib over the files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from manifests.hashing import HashingSink, in_background
from manifests.shards import ShardWriter
from manifests.storage import Location


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _table(n: int, start: int = 0) -> pa.Table:
    texts = [f"row {i} " + "lorem ipsum dolor sit amet " * (1 + i % 7) for i in range(start, start + n)]
    return pa.table({"id": [str(i) for i in range(start, start + n)], "text": texts})


@pytest.mark.parametrize("in_thread", [False, True])
def test_each_shard_s_recorded_sha256_and_size_are_those_of_the_file_written(tmp_path, in_thread):
    # a small target, so the stream rolls over into several shards mid-way
    w = ShardWriter(Location.parse(str(tmp_path)), "part-00000", relative_dir="shards",
                    target_bytes=5_000, row_group_rows=100, hash_in_thread=in_thread)
    for k in range(6):
        w.write(_table(250, start=250 * k))
    shards = w.close()
    assert len(shards) > 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"part-00000-{k:03d}.parquet" for k in range(len(shards))]
    for info in shards:
        path = tmp_path / info.path.split("/", 1)[1]
        assert info.sha256 == _sha(path)
        assert info.bytes == path.stat().st_size
    rows = pa.concat_tables(pq.read_table(tmp_path / s.path.split("/", 1)[1]) for s in shards)
    assert rows.column("id").to_pylist() == [str(i) for i in range(1500)]


@pytest.mark.parametrize("in_thread", [False, True])
def test_a_shard_written_to_an_object_store_filesystem_is_hashed_alike(tmp_path, in_thread):
    fs = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())  # a non-local Location, bytes on disk
    w = ShardWriter(Location(fs, "out"), "p", row_group_rows=64, hash_in_thread=in_thread)
    w.write(_table(300))
    [info] = w.close()
    assert info.sha256 == _sha(tmp_path / "out" / "p-000.parquet")


@pytest.mark.parametrize("threaded", [False, True])
@pytest.mark.parametrize("piece", [bytes, bytearray, memoryview, pa.py_buffer])
def test_the_sink_s_digest_is_hashlib_over_the_file_whatever_pieces_it_is_given(tmp_path, piece, threaded):
    path = tmp_path / "f.bin"
    rng = __import__("random").Random(7)
    pieces = [rng.randbytes(rng.choice([0, 1, 100, 5000, 300_000])) for _ in range(40)]
    sink = HashingSink(pafs.LocalFileSystem().open_output_stream(str(path)), threaded=threaded)
    for p in pieces:
        buf = bytearray(p)
        assert sink.write(piece(buf) if piece is not bytes else bytes(buf)) == len(p)
        buf[:] = b"\0" * len(buf)  # a writer that reuses its buffer once write returns: the digest must not see it
    assert sink.tell() == sum(map(len, pieces))
    with pytest.raises(RuntimeError, match="before close"):
        sink.digest()
    sink.close()
    sink.close()  # the Parquet writer may close it too
    expected = hashlib.sha256(b"".join(pieces)).hexdigest()
    assert sink.digest() == (expected, sum(map(len, pieces)))
    assert _sha(path) == expected


@pytest.mark.parametrize("in_thread", [False, True])
def test_a_failed_write_leaves_no_shard_and_no_temporary_file(tmp_path, in_thread):
    w = ShardWriter(Location.parse(str(tmp_path)), "part", row_group_rows=50, hash_in_thread=in_thread)
    w.write(_table(120))  # two row groups flushed, a file open
    w._sink._raw.close()  # the disk goes away under the open file
    with pytest.raises((OSError, ValueError, pa.ArrowException)):  # at the latest when the buffer is flushed
        w.write(_table(120, start=120))
        w.close()
    w.abort()
    assert list(tmp_path.iterdir()) == []


def test_in_background_hands_back_the_value_or_the_error():
    assert in_background(lambda: 6 * 7)() == 42

    def boom():
        raise KeyError("no")

    with pytest.raises(KeyError, match="no"):
        in_background(boom)()


def test_helper_threads_are_reused_and_a_job_never_waits_behind_another(tmp_path, monkeypatch):
    # a sink's job runs until its file closes: two open sinks and an input hash at once need three threads,
    # and those threads are reused afterwards instead of a new one per job. A fresh set of threads, counted by
    # itself: a job another test left running (an input hash nobody waited for) is a live helper thread too,
    # and counting every helper thread in the process failed this test under CI's load for that reason.
    from manifests import hashing

    threads = hashing._Threads()
    monkeypatch.setattr(hashing, "_threads", threads)
    fs = pafs.LocalFileSystem()
    for round_ in range(5):
        sinks = [HashingSink(fs.open_output_stream(str(tmp_path / f"{round_}-{i}.bin"))) for i in range(2)]
        for s in sinks:
            s.write(b"x" * 3_000_000)  # past a hand-over: the job is busy with it
        assert in_background(lambda: 6 * 7)() == 42  # with both sinks still open
        for i, s in enumerate(sinks):
            s.close()
            assert s.digest() == (hashlib.sha256(b"x" * 3_000_000).hexdigest(), 3_000_000)
        assert threads.started <= 3
    before = threads.started
    for _ in range(20):
        assert in_background(lambda: 1)() == 1
    assert threads.started == before


def test_a_forked_child_starts_helper_threads_of_its_own(tmp_path):
    import multiprocessing as mp

    assert in_background(lambda: 1)() == 1  # the parent has helper threads now; the child has none of them
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        # without a fresh set of helper threads the child's jobs would wait for threads it does not have
        got = pool.apply_async(_hash_in_child, (str(tmp_path / "child.bin"),)).get(timeout=60)
    assert got == hashlib.sha256(b"y" * 5000).hexdigest()


def _hash_in_child(path: str) -> str:
    sink = HashingSink(pafs.LocalFileSystem().open_output_stream(path))
    sink.write(b"y" * 5000)
    sink.close()
    return in_background(lambda: sink.digest()[0])()


@pytest.mark.parametrize("sizes", [[256, 512, 256], [100, 37, 300, 1, 250], [1024], [3, 3, 3, 1000]])
def test_shard_bytes_do_not_depend_on_how_the_rows_arrive(tmp_path, sizes):
    """Row groups cut from one incoming table are slices of it (no copy); groups spanning tables are combined
    first. Either way the file is byte for byte the one written from all rows as one contiguous table, in
    groups of the same size (an independent reference, written here with pyarrow's writer alone)."""
    from manifests.shards import write_options

    rows = _table(sum(sizes))
    batches, at = [], 0
    for n in sizes:  # the second of each pair arrives as a two-chunk table
        part = rows.slice(at, n)
        batches.append(pa.concat_tables([part.slice(0, n // 2), part.slice(n // 2)]) if len(batches) % 2 else part)
        at += n
    w = ShardWriter(Location.parse(str(tmp_path / "ours")), "part-00000", target_bytes=1 << 30, row_group_rows=128)
    for b in batches:
        w.write(b)
    [info] = w.close()
    reference = tmp_path / "reference.parquet"
    whole = rows.combine_chunks()
    with pq.ParquetWriter(str(reference), whole.schema, **write_options()) as ref:
        for start in range(0, whole.num_rows, 128):
            ref.write_table(whole.slice(start, 128).combine_chunks(), row_group_size=128)
    assert info.sha256 == _sha(reference)
