"""What a version's report shows, read with bounded work: the manifest's statistics (no data read), a seeded
sample of rows per drop reason from the rejects, a seeded sample of kept rows, and histograms over a bounded
sample of the kept rows. Nothing here grows with the version beyond reading the reason column of the rejects
(one string column) to find rows of each reason.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..catalog import Catalog, diff_versions
from ..dataset import DatasetVersion
from ..errors import ManifestError
from .evidence import parse_detail

TEXT_COLUMNS = ("text", "content")
SHOWN_CHARS = 4000  # of each sample's text (around its first highlight); the rest is cut, and said so
HISTOGRAM_ROWS = 50_000  # kept rows read for the histograms, at most
CATEGORY_LIMIT = 40  # a string column with at most this many distinct values in the sample is a category


@dataclass
class Sample:
    id: str
    source: str
    text: str
    n_chars: int
    stage: str = ""
    reason: str = ""
    detail: dict | None = None
    fields: dict = field(default_factory=dict)  # other short columns, shown beside the text


@dataclass
class Histogram:
    column: str
    kind: str  # "numeric" (bins) | "category" (values)
    bins: list[tuple[float, float, int]] = field(default_factory=list)
    values: list[tuple[str, int]] = field(default_factory=list)
    n: int = 0
    nulls: int = 0
    compare: list[tuple[float, float, int]] | None = None  # the rejects' counts in the same bins


@dataclass
class ReportData:
    version: DatasetVersion
    funnel: list[dict]  # one per stage: name, rows_in, rows_out, dropped {reason: n}, seconds, counters
    reasons: list[tuple[str, str, int]]  # (stage, reason, rows), most first
    dropped_samples: dict[tuple[str, str], list[Sample]]
    kept_samples: list[Sample]
    histograms: list[Histogram]
    parents: list[dict]  # {name, version_id, ref, missing?}
    rejects: DatasetVersion | None
    sample_rows_read: int = 0
    diff: dict | None = None


def _row_groups(version: DatasetVersion) -> list[tuple[object, int, int]]:
    """(shard location, row-group index, rows) over every shard, from the Parquet footers only."""
    out = []
    for loc in version.shard_locations():
        if not loc.path.endswith(".parquet"):
            continue
        with loc.fs.open_input_file(loc.path) as f:
            meta = pq.ParquetFile(f).metadata
        out += [(loc, i, meta.row_group(i).num_rows) for i in range(meta.num_row_groups)]
    return out


def _read_group(loc, index: int, columns: list[str]) -> pa.Table:
    with loc.fs.open_input_file(loc.path) as f:
        return pq.ParquetFile(f).read_row_group(index, columns=columns)


def _text_column(schema: pa.Schema) -> str | None:
    return next((c for c in TEXT_COLUMNS if c in schema.names), None)


def _shown_columns(schema: pa.Schema) -> list[str]:
    """Short scalar columns shown beside a sample (scores, languages, lengths), not the text or nested data."""
    skip = {"id", "source", "drop_stage", "drop_reason", "drop_detail", *TEXT_COLUMNS}
    return [f.name for f in schema if f.name not in skip and (pa.types.is_integer(f.type)
            or pa.types.is_floating(f.type) or pa.types.is_boolean(f.type)
            or pa.types.is_string(f.type) or pa.types.is_large_string(f.type))][:12]


def _sample(row: dict, text_col: str | None, shown: list[str]) -> Sample:
    text = row.get(text_col) if text_col else None
    text = text if isinstance(text, str) else ("" if text is None else str(text))
    fields = {}
    for c in shown:
        v = row.get(c)
        if isinstance(v, str) and len(v) > 120:
            v = v[:117] + "..."
        fields[c] = v
    return Sample(id=str(row.get("id", "")), source=str(row.get("source", "") or ""), text=text,
                  n_chars=len(text), stage=row.get("drop_stage") or "", reason=row.get("drop_reason") or "",
                  detail=parse_detail(row.get("drop_detail")), fields=fields)


def sample_kept(version: DatasetVersion, n: int, seed: int) -> tuple[list[Sample], int]:
    """`n` rows drawn from seeded-random row groups; (samples, rows read)."""
    groups = _row_groups(version)
    random.Random(seed).shuffle(groups)
    text_col, shown = _text_column(version.schema), _shown_columns(version.schema)
    columns = [c for c in ("id", "source", text_col, *shown) if c and c in version.schema.names]
    rows, read = [], 0
    for loc, i, _ in groups:
        if len(rows) >= 4 * n:
            break
        table = _read_group(loc, i, columns)
        read += table.num_rows
        rows += table.to_pylist()
    picked = random.Random(seed + 1).sample(rows, min(n, len(rows)))
    return [_sample(r, text_col, shown) for r in picked], read


def sample_rejects(rejects: DatasetVersion, n: int, seed: int) -> tuple[dict[tuple[str, str], list[Sample]], int]:
    """Up to `n` rows per (stage, reason): the reason columns of every row group are read to find candidates
    (seeded reservoir per reason), then only the chosen rows' other columns."""
    groups = _row_groups(rejects)
    random.Random(seed).shuffle(groups)
    chosen: dict[tuple[str, str], list[tuple[float, int, int]]] = {}  # key -> [(priority, group, row)]
    for g, (loc, i, rows) in enumerate(groups):
        t = _read_group(loc, i, ["drop_stage", "drop_reason"])
        # a uniform sample per reason: every row gets a seeded random priority, each reason keeps its n smallest
        t = pa.table({"stage": pc.fill_null(t.column(0), ""), "reason": pc.fill_null(t.column(1), ""),
                      "priority": pc.random(rows, initializer=seed * 1_000_003 + g), "row": pa.array(range(rows))})
        for key in t.select(["stage", "reason"]).group_by(["stage", "reason"]).aggregate([]).to_pylist():
            mask = pc.and_(pc.equal(t.column("stage"), key["stage"]), pc.equal(t.column("reason"), key["reason"]))
            part = t.filter(mask)
            best = part.take(pc.select_k_unstable(part, n, sort_keys=[("priority", "ascending")]))
            heap = chosen.setdefault((key["stage"], key["reason"]), [])
            heap += [(p, g, r) for p, r in zip(best.column("priority").to_pylist(), best.column("row").to_pylist())]
            heap.sort()
            del heap[n:]
    text_col, shown = _text_column(rejects.schema), _shown_columns(rejects.schema)
    columns = [c for c in ("id", "source", text_col, "drop_stage", "drop_reason", "drop_detail", *shown)
               if c and c in rejects.schema.names]
    wanted: dict[int, list[tuple[tuple[str, str], int]]] = {}
    for key, picks in chosen.items():
        for _, g, r in sorted(picks):
            wanted.setdefault(g, []).append((key, r))
    out: dict[tuple[str, str], list[Sample]] = {key: [] for key in chosen}
    read = 0
    for g, picks in sorted(wanted.items()):
        loc, i, _ = groups[g]
        table = _read_group(loc, i, columns)
        read += len(picks)
        rows = table.take(pa.array([r for _, r in picks])).to_pylist()
        for (key, _), row in zip(picks, rows):
            out[key].append(_sample(row, text_col, shown))
    return out, read


def _numeric_bins(values: list[float], bins: int = 24, lo: float | None = None,
                  hi: float | None = None) -> list[tuple[float, float, int]]:
    if not values:
        return []
    lo = min(values) if lo is None else lo
    hi = max(values) if hi is None else hi
    if hi <= lo:
        return [(lo, hi, len(values))]
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, max(0, int((v - lo) / width)))] += 1
    return [(lo + k * width, lo + (k + 1) * width, c) for k, c in enumerate(counts)]


def histograms(version: DatasetVersion, seed: int,
               rejects: DatasetVersion | None = None) -> tuple[list[Histogram], int]:
    """Histograms of the kept rows' numeric columns and small categories, and of text length (kept against
    rejected), over at most HISTOGRAM_ROWS rows from seeded-random row groups of each."""
    def read_sample(v: DatasetVersion, columns: list[str]) -> pa.Table:
        groups = _row_groups(v)
        random.Random(seed).shuffle(groups)
        parts, n = [], 0
        for loc, i, rows in groups:
            if n >= HISTOGRAM_ROWS:
                break
            parts.append(_read_group(loc, i, columns))
            n += rows
        return pa.concat_tables(parts) if parts else v.schema.empty_table().select(columns)

    schema = version.schema
    text_col = _text_column(schema)
    numeric = [f.name for f in schema if (pa.types.is_integer(f.type) or pa.types.is_floating(f.type))
               and f.name != "id"]
    strings = [c for c in _shown_columns(schema) if pa.types.is_string(schema.field(c).type)
               or pa.types.is_large_string(schema.field(c).type)]
    columns = list(dict.fromkeys([*numeric, *strings, *([text_col] if text_col else [])]))
    if not columns:
        return [], 0
    table = read_sample(version, columns)
    out = []
    if text_col:
        lengths = pc.utf8_length(table.column(text_col)).to_pylist()
        kept = [float(x) for x in lengths if x is not None]
        hist = Histogram(column=f"n_chars({text_col})", kind="numeric", n=len(kept),
                         nulls=len(lengths) - len(kept))
        rejected = []
        if rejects is not None and text_col in rejects.schema.names:
            rejected = [float(x) for x in pc.utf8_length(read_sample(rejects, [text_col]).column(0)).to_pylist()
                        if x is not None]
        both = kept + rejected
        if both:
            lo, hi = min(both), _quantile(both, 0.99)
            hist.bins = _numeric_bins([min(v, hi) for v in kept], lo=lo, hi=hi)
            hist.compare = _numeric_bins([min(v, hi) for v in rejected], lo=lo, hi=hi) if rejected else None
        out.append(hist)
    for c in numeric:
        raw = table.column(c).to_pylist()
        vals = [float(v) for v in raw if v is not None and v == v]
        out.append(Histogram(column=c, kind="numeric", bins=_numeric_bins(vals), n=len(vals),
                             nulls=len(raw) - len(vals)))
    for c in strings:
        counts = pc.value_counts(table.column(c)).to_pylist()
        if 1 < len(counts) <= CATEGORY_LIMIT:
            values = sorted(((str(d["values"]), d["counts"]) for d in counts), key=lambda x: -x[1])
            out.append(Histogram(column=c, kind="category", values=values[:20], n=table.num_rows))
    return out, table.num_rows


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _parents(catalog: Catalog, version: DatasetVersion) -> list[dict]:
    out = []
    for pid in version.manifest.parents:
        ref = pid.split("@")[-1]
        try:
            p = catalog.resolve(ref)
            out.append({"name": p.name, "version_id": p.version_id, "ref": f"{p.name}@{p.version_id[:12]}"})
        except (ManifestError, OSError):
            out.append({"name": "", "version_id": ref, "ref": ref[:12], "missing": True})
    return out


def _diff(catalog: Catalog, base: DatasetVersion, version: DatasetVersion) -> dict:
    """Rows added and removed from `base` to `version`, the removed ones by the reason `version`'s run gave
    (from its rejects, where it has them), and per-stage statistic deltas."""
    d = diff_versions(base, version)
    removed_by_reason: dict[str, int] = {}
    rejects = _rejects_of(catalog, version)
    if d.removed_ids and rejects is not None and "id" in rejects.schema.names:
        t = rejects.read(columns=["id", "drop_stage", "drop_reason"])
        hit = t.filter(pc.is_in(t.column("id"), value_set=pa.array(d.removed_ids, pa.string())))
        for stage, reason in zip(hit.column("drop_stage").to_pylist(), hit.column("drop_reason").to_pylist()):
            key = f"{stage}:{reason}"
            removed_by_reason[key] = removed_by_reason.get(key, 0) + 1
        explained = sum(removed_by_reason.values())
        if explained < len(d.removed_ids):
            removed_by_reason["(not in this run's input)"] = len(d.removed_ids) - explained
    return {"base": f"{base.name}@{base.version_id[:12]}", "rows_base": d.rows_a, "rows": d.rows_b,
            "added": len(d.added_ids), "removed": len(d.removed_ids), "added_ids": d.added_ids[:20],
            "removed_ids": d.removed_ids[:20], "removed_by_reason": removed_by_reason,
            "stats_delta": d.stats_delta}


def _rejects_of(catalog: Catalog, version: DatasetVersion) -> DatasetVersion | None:
    rid = version.manifest.extra.get("rejects_version")
    if not rid:
        return None
    try:
        return catalog.resolve(f"{version.name}.rejects@{rid}")
    except (ManifestError, OSError):
        return None


def collect(catalog: Catalog, ref: str, *, samples: int = 5, seed: int = 0, vs: str | None = None) -> ReportData:
    version = catalog.resolve(ref)
    m = version.manifest
    funnel = [{"name": s.name, "rows_in": s.rows_in, "rows_out": s.rows_out, "dropped": dict(s.dropped),
               "seconds": s.seconds, "counters": dict(s.counters)} for s in m.stats]
    reasons = sorted(((s["name"], r, n) for s in funnel for r, n in s["dropped"].items()), key=lambda x: -x[2])
    rejects = _rejects_of(catalog, version)
    dropped, read = sample_rejects(rejects, samples, seed) if rejects is not None else ({}, 0)
    kept, read_kept = sample_kept(version, samples, seed)
    hists, read_hist = histograms(version, seed, rejects)
    diff = _diff(catalog, catalog.resolve(vs), version) if vs else None
    return ReportData(version=version, funnel=funnel, reasons=reasons, dropped_samples=dropped,
                      kept_samples=kept, histograms=hists, parents=_parents(catalog, version), rejects=rejects,
                      sample_rows_read=read + read_kept + read_hist, diff=diff)


def to_json(data: ReportData) -> str:
    """The report's numbers as JSON (for tests and for tools): funnel, reasons, sample ids per reason."""
    return json.dumps({
        "version": f"{data.version.name}@{data.version.version_id}", "funnel": data.funnel,
        "reasons": [list(r) for r in data.reasons],
        "samples": {f"{s}:{r}": [x.id for x in xs] for (s, r), xs in sorted(data.dropped_samples.items())},
        "kept": [x.id for x in data.kept_samples], "parents": data.parents, "diff": data.diff,
    }, indent=1, sort_keys=True)
