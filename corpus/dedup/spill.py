"""Global-stage state on the storage filesystem: every file a global build writes or reads (hash
partitions, LSH buckets, graph edges, signatures, drop lists, the n-gram index) goes through
`manifests.storage.Location` (pyarrow.fs), so a local root, `s3://` and any pyarrow filesystem work
alike. Nothing here calls `open` or `os.path` on a local path.

Files are written whole and atomically (`Location.write_bytes_atomic`: temp + rename locally, one PUT
on an object store). A file that a later step expects and that is missing is an error naming it.
"""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from manifests.errors import FatalError
from manifests.storage import Location

from .ngrams import mix64


def as_location(where: "Location | str | os.PathLike") -> Location:
    """A Location as is; a path or URI parsed (`/x`, `s3://bucket/x`)."""
    return where if isinstance(where, Location) else Location.parse(where)


def require(loc: Location, what: str) -> None:
    if not loc.exists():
        raise FatalError(f"{what}: expected file {loc.uri} is missing (was the global build interrupted, "
                         "or does this node not see the data root?)")


def save_arrays(loc: Location, **arrays: np.ndarray) -> Location:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    loc.write_bytes_atomic(buf.getvalue())
    return loc


def load_arrays(loc: Location, what: str = "global stage") -> dict[str, np.ndarray]:
    require(loc, what)
    with np.load(io.BytesIO(loc.read_bytes())) as z:
        return {k: z[k] for k in z.files}


def write_table(loc: Location, table: pa.Table) -> Location:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    loc.write_bytes_atomic(buf.getvalue())
    return loc


def read_table(loc: Location, columns: list[str] | None = None, what: str = "global stage") -> pa.Table:
    require(loc, what)
    with loc.fs.open_input_file(loc.path) as f:
        return pq.read_table(f, columns=columns)


def parquet_schema_names(loc: Location) -> list[str]:
    with loc.fs.open_input_file(loc.path) as f:
        return pq.read_schema(f).names


def num_rows(loc: Location) -> int:
    with loc.fs.open_input_file(loc.path) as f:
        return pq.ParquetFile(f).metadata.num_rows


def iter_batches(loc: Location, *, columns: list[str], batch_rows: int):
    with loc.fs.open_input_file(loc.path) as f:
        yield from pq.ParquetFile(f).iter_batches(batch_size=batch_rows, columns=columns)


_PART_SEED = np.uint64(0x5EED_0F_9A27)


def partition_of(keys: np.ndarray, n: int) -> np.ndarray:
    """Hash partition (0..n-1) of uint64 keys; mixed first so structured keys spread evenly."""
    if n == 1:
        return np.zeros(len(keys), np.int64)
    return (mix64(keys.astype(np.uint64, copy=False) ^ _PART_SEED) % np.uint64(n)).astype(np.int64)


def split_by_partition(part: np.ndarray, n: int) -> list[np.ndarray]:
    """For each partition, the positions that fall in it, in increasing order."""
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(n + 1))
    return [order[bounds[p]:bounds[p + 1]] for p in range(n)]


def n_partitions(tasks, n_shards: int) -> int:
    """How many hash partitions a build shuffles into: the TaskMap's `partitions` when set (tests,
    large clusters), else two per worker. The result never depends on it."""
    chosen = getattr(tasks, "partitions", None)
    if chosen:
        return int(chosen)
    return max(1, 2 * int(getattr(tasks, "workers", 1) or 1))


# Global row addresses: (shard, row) packed in one int64, ordered like (shard, row).
ROW_BITS = 40


def pack(shard: int | np.ndarray, row: np.ndarray) -> np.ndarray:
    return (np.asarray(shard, np.int64) << ROW_BITS) | row.astype(np.int64)


def unpack(node: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return node >> ROW_BITS, node & ((1 << ROW_BITS) - 1)


def ids_of(shards: list[Location], nodes: np.ndarray) -> pa.Array:
    """The `id` values of packed (shard, row) addresses, in the order given; reads only the id column
    of the shards that hold them."""
    out = np.empty(len(nodes), object)
    shard, row = unpack(nodes)
    for s in np.unique(shard).tolist():
        sel = np.flatnonzero(shard == s)
        ids = read_table(shards[s], ["id"]).column("id")
        out[sel] = ids.take(pa.array(row[sel])).to_numpy(zero_copy_only=False)
    return pa.array(out.tolist(), pa.string())
