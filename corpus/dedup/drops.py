"""The apply side shared by the dedup stages: drop rows whose id is in a set loaded from the drop
lists a `build` wrote (one Parquet file per hash partition, on the storage filesystem).

The set is read lazily, once per process, so the bound stage that travels to every task is only a
few Locations (a large drop set is not pickled per task).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from manifests.storage import Location

from ..stage import Filter, evidence
from .spill import as_location, parquet_schema_names, read_table, write_table

_CACHE: dict[tuple, tuple[pa.Array, pa.Array]] = {}


def write_drop_ids(where: Location | str, ids: pa.Array, extra: dict[str, pa.Array] | None = None) -> Location:
    """One drop list: the ids to drop and, where the build knows it, `kept_id`: the row each duplicates."""
    return write_table(as_location(where), pa.table({"id": ids, **(extra or {})}))


def _locations(state) -> list[Location]:
    """A build's state: one drop list, or a list of them (legacy states are a path string)."""
    if state is None:
        return []
    if isinstance(state, (list, tuple)):
        return [as_location(s) for s in state]
    return [as_location(state)]


def drop_lists_key(state) -> tuple:
    """Which drop lists, as they are now: a list rebuilt at the same path (a rerun after an input changed)
    is another key, so a long-lived process (a test, a notebook, a Ray worker) never applies a stale one."""
    locs = _locations(state)
    infos = locs[0].fs.get_file_info([loc.path for loc in locs]) if locs else []
    return tuple((loc.uri, info.size, info.mtime_ns) for loc, info in zip(locs, infos))


def _load(state, key: tuple | None = None) -> tuple[pa.Array, pa.Array]:
    """(ids, kept ids) of every drop list of `state`; kept ids null where a list has none."""
    locs = _locations(state)
    key = key if key is not None else drop_lists_key(state)
    if key not in _CACHE:
        ids, kept = [], []
        for loc in locs:
            names = parquet_schema_names(loc)
            t = read_table(loc, [c for c in ("id", "kept_id") if c in names], what="dedup drop list")
            ids += t.column("id").chunks
            kept += (t.column("kept_id") if "kept_id" in names else pa.nulls(t.num_rows, pa.string())).chunks \
                if t.num_rows else []
        _CACHE.clear()  # one artifact at a time per process is enough
        _CACHE[key] = (pa.chunked_array(ids, pa.string()).combine_chunks(),
                       pa.chunked_array(kept, pa.string()).combine_chunks())
    return _CACHE[key]


def load_drop_ids(state, key: tuple | None = None) -> pa.Array:
    return _load(state, key)[0]


class DropIds(Filter):
    """Drops rows whose `id` is listed in the drop lists of `state`, with one reason; the evidence is
    the id of the row it duplicates (`{"kept_id": ...}`) where the build recorded it."""

    reason = "duplicate"

    def __init__(self, config, state):
        super().__init__(config)
        self.state = state
        self._lists_key = None  # drop_lists_key, taken once per bound stage (not a statistic: a fixed fact)

    def _key(self) -> tuple:
        if self._lists_key is None:
            self._lists_key = drop_lists_key(self.state)
        return self._lists_key

    def reasons(self, table: pa.Table) -> pa.Array:
        if not _locations(self.state):
            return pa.nulls(table.num_rows, pa.string())
        hit = pc.is_in(table.column("id"), value_set=load_drop_ids(self.state, self._key()))
        return pc.if_else(hit, pa.scalar(self.reason), pa.scalar(None, pa.string()))

    def details(self, table: pa.Table, dropped: pa.Array) -> list[str | None]:
        ids, kept = _load(self.state, self._key())
        where = pc.index_in(table.column("id").take(dropped), value_set=ids)
        return evidence({"kept_id": k} for k in kept.take(where).to_pylist())


def check_columns(where: Location | str, columns: list[str], stage: str) -> None:
    """A clear error naming the shard, the stage and the fix when a column is missing."""
    from manifests.errors import ConfigError

    loc = as_location(where)
    names = parquet_schema_names(loc)
    missing = [c for c in columns if c not in names]
    if missing:
        raise ConfigError(f"{stage}: shard {loc.uri} has no column {missing[0]!r}; its columns are {names} "
                          f"(set `field:` in the stage's options)")


def read_drops(state) -> pa.Table:
    """Every row of a dedup or decontamination build's drop lists (for audits and evaluations)."""
    tables = [read_table(loc, what="drop list") for loc in _locations(state)]
    return pa.concat_tables(tables) if tables else pa.table({"id": pa.array([], pa.string())})
