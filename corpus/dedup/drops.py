"""The apply side shared by the dedup stages: drop rows whose id is in a set loaded from an
artifact written by `build`.

The set is read lazily, once per process, from the Parquet file under the build's workdir, so the
bound stage that travels to every task is only a path (a large drop set is not pickled per task).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..stage import Filter

_CACHE: dict[str, pa.Array] = {}


def write_drop_ids(path: str, ids: pa.Array, extra: dict[str, pa.Array] | None = None) -> str:
    table = pa.table({"id": ids, **(extra or {})})
    pq.write_table(table, path)
    return path


def load_drop_ids(path: str) -> pa.Array:
    if path not in _CACHE:
        ids = pq.read_table(path, columns=["id"]).column("id")
        _CACHE.clear()  # one artifact at a time per process is enough
        _CACHE[path] = ids.combine_chunks() if ids.num_chunks else pa.array([], pa.string())
    return _CACHE[path]


class DropIds(Filter):
    """Drops rows whose `id` is listed in the artifact at `path`, with one reason."""

    reason = "duplicate"

    def __init__(self, config, path: str | None):
        super().__init__(config)
        self.path = path

    def reasons(self, table: pa.Table) -> pa.Array:
        if self.path is None:
            return pa.nulls(table.num_rows, pa.string())
        hit = pc.is_in(table.column("id"), value_set=load_drop_ids(self.path))
        return pc.if_else(hit, pa.scalar(self.reason), pa.scalar(None, pa.string()))


def check_columns(path: str, columns: list[str], stage: str) -> None:
    """A clear error naming the shard, the stage and the fix when a column is missing."""
    from manifests.errors import ConfigError

    names = pq.read_schema(path).names
    missing = [c for c in columns if c not in names]
    if missing:
        raise ConfigError(f"{stage}: shard {path} has no column {missing[0]!r}; its columns are {names} "
                          f"(set `field:` in the stage's options)")
