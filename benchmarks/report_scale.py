"""How long `data report` takes on a large version, and how big the page is.

    python benchmarks/report_scale.py [--rows 10000000] [--rejects 1000000] [--work DIR]

Builds a version of ROWS rows (ids, a text column of varied lengths, a score and a language column) and a
rejects version of REJECTS rows over six stages' reasons with JSON evidence, with the manifest stats of a
run, then times `write_report` on it (cold: a fresh process would read the same bytes). The report reads
the manifest's stats and a bounded sample (row groups chosen by a seeded draw), so its time should not grow
with the version. There is no peer to run beside it: the HF dataset viewer, datatrove's stats and
data-juicer's analyser are services or full passes, not a static page from a sample.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from manifests import Catalog, StageStats  # noqa: E402
from manifests.report import write_report  # noqa: E402

CHUNK = 1_000_000
WORDS = np.array("the of and a to in is was for on that with as by at from it an be this are".split())


def _chunk(start: int, n: int, rng: np.random.Generator, prefix: str) -> pa.Table:
    idx = np.arange(start, start + n)
    ids = pc.binary_join_element_wise(pa.scalar(prefix), pc.cast(pa.array(idx), pa.string()), "")
    # text: a few words picked per row, repeated to a row-specific length (40 to ~2,000 characters)
    words = WORDS[rng.integers(0, len(WORDS), size=(n, 4))]
    base = pc.binary_join_element_wise(*[pa.array(words[:, k]) for k in range(4)], " ")
    reps = rng.integers(2, 100, size=n)
    text = pc.binary_repeat(pc.binary_join_element_wise(base, pa.scalar(" "), ""), pa.array(reps))
    return pa.table({"id": ids, "source": pa.array(np.full(n, "bench.jsonl")), "text": text,
                     "quality__score": pa.array(rng.random(n).astype(np.float32)),
                     "lang": pa.array(np.where(rng.random(n) < 0.9, "en", "de"))})


def build(catalog: Catalog, rows: int, rejects: int) -> str:
    rng = np.random.default_rng(0)
    reasons = [("text_length_v1", "too_short", '{"chars":12,"words":3,"min_chars":200}'),
               ("gopher_quality_v1", "gopher_short_doc", '{"words":20,"min":50}'),
               ("fineweb_quality_v1", "line_punct_ratio", '{"punct_lines":0,"lines":9,"min_ratio":0.12}'),
               ("lang_filter_v1", "wrong_language", '{"lang":"de","score":0.98,"languages":["en"],"min":0.65}'),
               ("exact_dedup_v1", "duplicate", '{"kept_id":"k17"}'),
               ("decontaminate_v1", "contaminated:gsm8k", '{"benchmark":"gsm8k","item":"test:42","ngram":"a b c"}')]

    def reject_tables():
        for start in range(0, rejects, CHUNK):
            t = _chunk(start, min(CHUNK, rejects - start), rng, "r")
            pick = rng.integers(0, len(reasons), size=t.num_rows)
            for col, k in (("drop_stage", 0), ("drop_reason", 1), ("drop_detail", 2)):
                t = t.append_column(col, pa.array(np.array([r[k] for r in reasons])[pick]))
            yield t

    def kept_tables():
        for start in range(0, rows, CHUNK):
            yield _chunk(start, min(CHUNK, rows - start), rng, "k")

    rv = catalog.write_table("bench.rejects", reject_tables())
    per = rejects // len(reasons)
    total = rows + rejects
    stats, left = [], total
    for stage, reason, _ in reasons:
        stats.append(StageStats(stage, rows_in=left, rows_out=left - per, dropped={reason: per}, seconds=left / 2e6))
        left -= per
    v = catalog.write_table("bench", kept_tables(), stats=stats, extra={"rejects_version": rv.version_id})
    return f"bench@{v.version_id}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--rejects", type=int, default=1_000_000)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="report-scale-"))
    catalog = Catalog(work / "root")
    t0 = time.perf_counter()
    ref = build(catalog, args.rows, args.rejects)
    built = time.perf_counter() - t0
    version = catalog.resolve(ref)
    t0 = time.perf_counter()
    page = write_report(catalog, ref, work / "reports", samples=5)
    took = time.perf_counter() - t0
    print(f"version: {version.manifest.rows:,} rows in {len(version.manifest.shards)} shards "
          f"({version.manifest.bytes / 1e6:,.0f} MB), rejects {args.rejects:,} rows; built in {built:.0f} s")
    print(f"report:  {took:.2f} s, page {os.path.getsize(page) / 1e6:.2f} MB "
          f"(+ {os.path.getsize(page.with_suffix('.json')) / 1e6:.2f} MB of numbers), load {os.getloadavg()[0]:.1f}")
    print(f"         {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
