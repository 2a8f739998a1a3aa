"""The corpus step of the demo (manifests/demo.py runs every area's step): every pipeline in
configs/demo/ (in file-name order) on the bundled real data, each followed by its `data report` page in
`<root>/../reports/` (beside the data root, so the pages link to each other's parents)."""

from __future__ import annotations

import glob
import os

from manifests import Catalog
from manifests.report import write_report

from .executors import run_pipeline
from .pipeline import load_pipeline
from .report import stats_table


def run_configs(root: str, pattern: str = "configs/demo/*.yaml") -> None:
    for path in sorted(glob.glob(pattern)):
        pipeline = load_pipeline(path, overrides={"output.root": root})
        print(f"\n=== {path}: {pipeline.name} ===", flush=True)
        outcome = run_pipeline(pipeline, progress=False)
        v = outcome.version
        print(stats_table(outcome.stats))
        print(f"-> {v.name}@{v.version_id[:12]}  {v.manifest.rows:,} rows  at {v.directory.uri}"
              + (f"\n   rejects {outcome.rejects.name}@{outcome.rejects.version_id[:12]}" if outcome.rejects else ""))
        for e in outcome.errors:
            if e.get("kind") == "shard":
                print(f"   shard error: {e['input']}: {e['reason']}")
        page = write_report(Catalog(root), f"{v.name}@{v.version_id}", reports_dir(root))
        print(f"   report {page}")


def reports_dir(root: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(root.rstrip("/"))) or ".", "reports")


def run(root: str) -> None:
    run_configs(root)
