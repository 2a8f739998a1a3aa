"""The stage contract.

A stage has a versioned `name` (`text_length_v1`), a frozen keyword-only config dataclass, and a
pure `__call__(table) -> StageResult`. The result carries the output table, the stage's statistics
for that table and the rejected rows (with `drop_reason`), so nothing lives on `self` and nothing
is dropped silently. A stage does not know how it is run.

Kinds:
- Scorer: adds columns (`quality__fasttext_score`); never drops.
- Filter: returns one reason per row (null = keep); the base class drops and records.
- Mapper: rewrites rows one to one (normalisation, extraction).
- GlobalStage: needs a pass over the whole dataset first (dedup, decontamination): `build`
  computes an index from every shard through the executor's `TaskMap`, `bind` returns the
  local stage that applies it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from manifests.manifest import StageStats

from manifests.config import build_config, config_to_dict

DROP_REASON = "drop_reason"
DROP_STAGE = "drop_stage"
DROP_DETAIL = "drop_detail"  # the evidence that decided a drop: short JSON (see drop_by_reason)


@dataclass(frozen=True, kw_only=True)
class NoConfig:
    """For stages without options."""


@dataclass
class StageResult:
    table: pa.Table
    stats: StageStats
    rejects: pa.Table | None = None


class Stage(ABC):
    name: ClassVar[str]
    Config: ClassVar[type] = NoConfig
    # Heavy modules the stage imports on first use (spaCy, a model library). The local executor imports them,
    # with the stage's own module, once in its forkserver, so that no worker of any pass imports them again.
    preload: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: Any = None):
        self.config = build_config(self.Config, config, where=f"stage {self.name}")

    @classmethod
    def from_mapping(cls, mapping: dict | None) -> "Stage":
        return cls(mapping or {})

    def config_dict(self) -> dict:
        return config_to_dict(self.config)

    def resources(self) -> dict[str, str | Path]:
        """Files or folders this stage reads besides its input (word lists, model files, benchmark sets):
        a label -> path. Their content hashes go into `describe()`, so the run key and the manifest change
        when they do (a stage that reads nothing returns {} and its description is unchanged)."""
        return {}

    def reads(self) -> tuple[str, ...]:
        """The input columns this stage needs, for the checks made before a run (preflight.py): its
        config's `field` (or `fields`) if it has one, else `text`. A stage that reads other columns says so."""
        field = getattr(self.config, "field", None)
        fields = getattr(self.config, "fields", None)
        if isinstance(fields, (list, tuple)) and fields and all(isinstance(f, str) for f in fields):
            return tuple(fields)
        return (field,) if isinstance(field, str) and field else ("text",)

    def describe(self) -> dict:
        out = {"name": self.name, "config": self.config_dict()}
        resources = self.resources()
        if resources:
            out["resources"] = {label: content_sha256(path) for label, path in sorted(resources.items())}
        return out

    def __call__(self, table: pa.Table) -> StageResult:
        start = time.perf_counter()
        result = self.apply(table)
        result.stats.seconds += time.perf_counter() - start
        result.stats.bytes_in += table.nbytes
        result.stats.bytes_out += result.table.nbytes
        return result

    @abstractmethod
    def apply(self, table: pa.Table) -> StageResult:
        """Process one table; must not keep state between calls."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"


class Scorer(Stage):
    """Adds (or replaces) columns; keeps every row."""

    @abstractmethod
    def score(self, table: pa.Table) -> dict[str, pa.Array]:
        ...

    def counters(self, table: pa.Table, columns: dict[str, pa.Array]) -> dict[str, int]:
        return {}

    def apply(self, table: pa.Table) -> StageResult:
        columns = self.score(table)
        out = with_columns(table, columns)
        stats = StageStats(self.name, rows_in=table.num_rows, rows_out=out.num_rows,
                           counters=self.counters(table, columns))
        return StageResult(out, stats)


class Mapper(Stage):
    """Rewrites rows one to one; may also drop rows by returning reasons, and count things."""

    rejects_show_input: ClassVar[bool] = True  # False: rejects show the rewritten row instead
    # a column of the rewritten table that holds each row's evidence: copied to the rejects as `drop_detail`
    detail_column: ClassVar[str | None] = None

    @abstractmethod
    def transform(self, table: pa.Table) -> tuple:
        """Return (new table with the same row count, reasons or None, or `(reasons, evidence)` as in
        `Filter.reasons`), optionally followed by a dict of counters for the stage's stats (e.g. PII found per category)."""

    def apply(self, table: pa.Table) -> StageResult:
        out, reasons, *rest = self.transform(table)
        if reasons is None:
            result = StageResult(out, StageStats(self.name, rows_in=table.num_rows, rows_out=out.num_rows))
        else:
            details = out.column(self.detail_column) if self.detail_column else None
            if isinstance(reasons, tuple):  # (reasons, evidence) as in Filter.reasons
                reasons, found = reasons
                details = evidence(found)
            result = drop_by_reason(self.name, out, reasons, original=table if self.rejects_show_input else None,
                                    details=details)
        if rest:
            result.stats.counters.update(rest[0])
        return result


class Filter(Stage):
    """Decides per row: a reason string drops it, null keeps it."""

    @abstractmethod
    def reasons(self, table: pa.Table) -> pa.Array | tuple[pa.Array, list]:
        """One entry per row: null to keep, else a short reason (`too_short`). A rule that measures
        something while deciding may return `(reasons, evidence)` instead: one dict (or None) per row,
        e.g. `{"rule": ..., "value": 0.04, "max": 0.01}`, which goes to the rejects' `drop_detail`."""

    def details(self, table: pa.Table, dropped: pa.Array) -> list[str | None] | None:
        """The evidence for each dropped row (`dropped`: the row indices), as short JSON strings, or None.
        Override where the rule has something to show (the measured value and the threshold, the matched
        terms and their spans)."""
        return None

    def apply(self, table: pa.Table) -> StageResult:
        reasons = self.reasons(table)
        if isinstance(reasons, tuple):
            reasons, found = reasons
            return drop_by_reason(self.name, table, reasons, details=evidence(found))
        return drop_by_reason(self.name, table, reasons, details=lambda dropped: self.details(table, dropped))


def decisions(failures: Iterable[tuple[str, Any] | None]) -> tuple[pa.Array, list]:
    """Per-row `(reason, evidence)` or None (keep) -> what `Filter.reasons` returns."""
    reasons, found = [], []
    for f in failures:
        reasons.append(None if f is None else f[0])
        found.append(None if f is None else f[1])
    return pa.array(reasons, pa.string()), found


def evidence(items: Iterable[Any]) -> list[str | None]:
    """Per-row evidence (dicts, lists, numbers or None) as the short JSON strings `drop_detail` holds;
    floats rounded to 4 significant digits so a detail stays short and reads at a glance."""
    return [None if item is None else json.dumps(_rounded(item), ensure_ascii=False, separators=(",", ":"))
            for item in items]


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.4g}") if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


class ThresholdFilter(Filter):
    """The generic score filter: drops rows whose `score_column()` is below `threshold()` as `reason`.

    Score, then decide: a scorer stage adds the column, this compares. A null score drops as
    `null_reason` (the same as `reason` by default; None keeps it). Subclasses name the column,
    reason and the stage that must run first; the threshold comes from their config (`min_score`)."""

    reason: ClassVar[str]
    null_reason: ClassVar[str | None] = ""  # "": drop as `reason`; None: keep; else this reason
    requires: ClassVar[str] = "the scorer"  # named in the error when the column is missing

    def score_column(self) -> str:
        return self.config.column

    def threshold(self) -> float:
        return self.config.min_score

    def reasons(self, table: pa.Table) -> pa.Array:
        column = self.score_column()
        if column not in table.schema.names:
            from manifests.errors import ConfigError

            raise ConfigError(f"{self.name}: no column {column!r}; put {self.requires} before it")
        score = table.column(column)
        low = pc.fill_null(pc.less(score, self.threshold()), False)
        out = pc.if_else(low, pa.scalar(self.reason), pa.scalar(None, pa.string()))
        if self.null_reason is not None:
            out = pc.if_else(pc.is_null(score), pa.scalar(self.null_reason or self.reason), out)
        return out

    def details(self, table: pa.Table, dropped: pa.Array) -> list[str | None]:
        """`{"column": ..., "value": the row's score, "min": the threshold}` (value null: no score)."""
        column, threshold = self.score_column(), self.threshold()
        return [json.dumps({"column": column, "value": v, "min": threshold})
                for v in table.column(column).take(dropped).to_pylist()]


@functools.lru_cache(maxsize=256)
def _sha256_cached(path: str, stamp: tuple) -> str:
    p = Path(path)
    h = hashlib.sha256()
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    for f in files:
        if "__pycache__" in f.parts:
            continue
        h.update(f.relative_to(p).as_posix().encode() + b"\0" if p.is_dir() else b"")
        h.update(f.read_bytes())
    return h.hexdigest()


def content_sha256(path: str | Path) -> str:
    """sha256 over a file's bytes, or over a folder's files (relative names and bytes, in name order);
    cached per (path, size, mtime). A missing resource is an error naming it."""
    p = Path(path)
    if not p.exists():
        from manifests.errors import ConfigError

        raise ConfigError(f"resource {p} is missing (a broken install, or a wrong path in the config)")
    st = p.stat()
    stamp = (st.st_size, st.st_mtime_ns) if p.is_file() else tuple(
        (f.as_posix(), f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(p.rglob("*")) if f.is_file())
    return _sha256_cached(str(p), stamp)


def drop_by_reason(
    stage_name: str, table: pa.Table, reasons: pa.Array, *, original: pa.Table | None = None,
    details: Any = None,
) -> StageResult:
    """Keep rows whose reason is null; return the rest as rejects with their reason.

    `original` is what the rejects show (e.g. the raw row before a Mapper rewrote it). `details` is the
    evidence: a sequence with one entry per row of `table`, or a callable given the dropped rows' indices
    (a pa.Array) that returns one entry per dropped row; entries are short JSON strings (or None) and go to
    the rejects' `drop_detail`, so a report or a query can show what decided each drop.
    """
    if len(reasons) != table.num_rows:
        raise RuntimeError(f"{stage_name}: returned {len(reasons)} reasons for {table.num_rows} rows")
    reasons = pa.array(reasons, type=pa.string()) if not isinstance(reasons, (pa.Array, pa.ChunkedArray)) else reasons
    keep = pc.is_null(reasons)
    kept = table if reasons.null_count == len(reasons) else table.filter(keep)  # no copy when nothing drops
    dropped_mask = pc.invert(keep)
    dropped = {}
    rejects = None
    n_dropped = table.num_rows - kept.num_rows
    if n_dropped:
        counts = pc.value_counts(pc.drop_null(reasons))
        dropped = {c["values"].as_py(): c["counts"].as_py() for c in counts}
        source = original if original is not None else table
        rejects = source.filter(dropped_mask)
        columns = {DROP_REASON: pc.filter(reasons, dropped_mask),
                   DROP_STAGE: pa.array([stage_name] * n_dropped, pa.string())}
        if callable(details):
            details = details(pc.indices_nonzero(dropped_mask))
        elif details is not None:
            if len(details) != table.num_rows:
                raise RuntimeError(f"{stage_name}: returned {len(details)} details for {table.num_rows} rows")
            if not isinstance(details, (pa.Array, pa.ChunkedArray)):
                details = pa.array(details, pa.string())
            details = pc.filter(details, dropped_mask)
        if details is not None:
            columns[DROP_DETAIL] = pc.cast(details, pa.string()) if isinstance(details, (pa.Array, pa.ChunkedArray)) \
                else pa.array(details, pa.string())
        rejects = with_columns(rejects, columns)
    stats = StageStats(stage_name, rows_in=table.num_rows, rows_out=kept.num_rows, dropped=dropped)
    return StageResult(kept, stats, rejects)


def with_columns(table: pa.Table, columns: dict[str, Any]) -> pa.Table:
    for name, values in columns.items():
        if name in table.schema.names:
            table = table.set_column(table.schema.get_field_index(name), name, values)
        else:
            table = table.append_column(name, values)
    return table


class TaskMap(ABC):
    """What an executor offers a global stage's build: run `fn` over items in parallel."""

    # How many hash partitions a global build shuffles into; None lets the build choose (two per
    # worker). Results never depend on it (tests set it to check that).
    partitions: int | None = None

    @abstractmethod
    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
        ...

    def broadcast(self, value: Any, *, saved: Any = None, load: Callable[[Any], Any] | None = None) -> "Shared":
        """A handle to a large read-only value (an index) that tasks `get()` without it travelling
        with every task. Default: the value was `saved` (a storage Location) and each worker
        process `load`s it once. Executors with an object store override this (Ray: `ray.put`)."""
        return StoredShared(saved, load) if saved is not None else InlineShared(value)


class Shared(ABC):
    @abstractmethod
    def get(self) -> Any:
        ...


@dataclass(frozen=True)
class InlineShared(Shared):
    value: Any

    def get(self) -> Any:
        return self.value


_SHARED_CACHE: dict[str, Any] = {}


@dataclass(frozen=True)
class StoredShared(Shared):
    location: Any  # manifests.storage.Location
    load: Callable[[Any], Any]

    def get(self) -> Any:
        key = self.location.uri
        if key not in _SHARED_CACHE:
            _SHARED_CACHE.clear()  # one broadcast value per worker process at a time
            _SHARED_CACHE[key] = self.load(self.location)
        return _SHARED_CACHE[key]


class GlobalStage(Stage):
    """A stage that needs the whole dataset: `build` makes an index, `bind` applies it locally."""

    @abstractmethod
    def build(self, shards: list[str], *, workdir: str, tasks: TaskMap) -> Any:
        """Compute the index from `shards` (Parquet paths, in order) and return a small,
        picklable state (or a path to an artifact under `workdir`)."""

    @abstractmethod
    def bind(self, state: Any) -> Stage:
        """The local stage that applies `state`; its name is this stage's name."""

    def build_fixed(self) -> None:
        """The part of `build` whose cost does not grow with the corpus (e.g. an index of benchmark
        items made on the driver); run alone by `corpus plan` to measure it. Most builds have none."""

    def apply(self, table: pa.Table) -> StageResult:  # pragma: no cover - executors call bind()
        raise RuntimeError(f"{self.name} is a global stage; run it through an executor")


def replace_config(stage: Stage, **changes: Any) -> Stage:
    return type(stage)(dataclasses.replace(stage.config, **changes))
