"""Demo step (after configs/demo/*): train the quality classifier on the bundled data and score the
`web` version with it.

Positives: `c4-clean` (300 real C4 documents, normalised). Negatives: the raw text of the bundled
Common Crawl / wget pages in `cc-html` (HTML -> every visible string, boilerplate kept, 300-word
chunks), minus the pages that survived into `web` (so the model never trained on what it scores:
the negatives are the pages the heuristics rejected). `web-scored` keeps rows with P(clean) >= 0.5.
"""

from __future__ import annotations

import json

from manifests.catalog import Catalog
from manifests.errors import ManifestError


def run(root: str) -> None:
    from ..executors import run_pipeline
    from ..pipeline import load_pipeline
    from ..report import stats_table
    from .train import train_classifier

    catalog = Catalog(root)
    try:
        catalog.resolve("c4-clean"), catalog.resolve("cc-html")
    except ManifestError as exc:
        print(f"skipped: {exc}")
        return
    try:
        catalog.resolve("web")
    except ManifestError:
        print("no `web` version to score (configs/demo/40-web-dedup.yaml did not run)")
        return
    # the pages kept in `web` are left out of the negatives: the model never saw what it scores
    model = train_classifier(catalog, positive="c4-clean", negative="cc-html", negative_field="content",
                             out="quality", exclude="web")
    m = model.manifest
    print(f"classifier quality@{m['version_id'][:12]}: {json.dumps(m['metrics'])}")
    pipeline = load_pipeline({
        "name": "web-scored", "input": {"format": "parquet", "version": "web"},
        "output": {"root": root, "shard_target_bytes": "64MiB"},
        "executor": {"kind": "local", "workers": 2, "batch_rows": 1024},
        "stages": [{"quality_classifier_v1": {"model": "quality", "models_root": root}},
                   {"quality_classifier_filter_v1": {"min_score": 0.5}}],
    })
    outcome = run_pipeline(pipeline, progress=False)
    print(stats_table(outcome.stats))
    print(f"-> {outcome.version.name}@{outcome.version.version_id[:12]}  {outcome.version.manifest.rows:,} rows")
