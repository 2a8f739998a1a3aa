"""`cidermill data report REF [--vs REF2] [--out DIR] [--samples N]`: one self-contained HTML page per version.

The page shows the funnel (rows in and out of each stage, drops by reason, time), N seeded samples per drop
reason with the evidence that decided each drop marked in the text, kept samples beside them, histograms of
the numeric and small categorical columns, lineage, and with `--vs` a diff. It reads the manifest's
statistics, a bounded sample of rows and the rejects' reason column, so a large version renders in seconds.
Pyarrow only, like the rest of `manifests`.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..catalog import Catalog
from .collect import ReportData, collect, to_json
from .page import render, report_name

__all__ = ["ReportData", "collect", "render", "report_name", "to_json", "write_report"]


def write_report(catalog: Catalog, ref: str, out_dir: str | Path, *, samples: int = 5, seed: int = 0,
                 vs: str | None = None) -> Path:
    """Write `<out_dir>/<name>@<id12>.html` (and its numbers as `.json` beside it); returns the page's path."""
    if samples < 1:
        from ..errors import ConfigError

        raise ConfigError(f"--samples must be >= 1; got {samples}")
    data = collect(catalog, ref, samples=samples, seed=seed, vs=vs)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    page = out / report_name(data.version.name, data.version.version_id)
    for path, body in ((page, render(data, samples=samples, seed=seed)), (page.with_suffix(".json"), to_json(data))):
        tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
        tmp.write_text(body, encoding="utf-8")
        os.replace(tmp, path)
    return page
