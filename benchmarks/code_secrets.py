"""Credentials in code: our `code_secrets_v3` detector (corpus/pii/secrets.py: rules + the credential
model) vs CredSweeper 1.19.5 (its ML model) and detect-secrets 1.5.0 on the same real files: CredData's
development set (../shared/data/creddata_dev, 1,907 files from 44 repositories, labelled line by line).
Files/s on one core (wall, and CPU time, the steadier on a shared machine), and the line-level recall / false-hit rate CredData's benchmark computes.

CredSweeper's model is trained on CredData, so its figures here are in-sample: a ceiling. Ours is
in-sample too (the shipped model is fitted on these files); its held-out-repository figures are in the
model's manifest and in `cidermill eval data pii`. The peers run as their own processes through
evals/data/_pii_code_peers.py (CredSweeper's start-up is measured on an empty folder and subtracted).

    .venv/bin/python benchmarks/code_secrets.py [--files 400] [--repeats 3] [--peer-python PY]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from web_common import REPO, SHARED, measure

sys.path.insert(0, str(REPO))


def ours(files):
    from corpus.pii import find_secrets
    from corpus.pii import secrets

    # every timed repeat starts cold, like the peers' fresh processes: the name and value caches would
    # otherwise hold every identifier, line and value of the files from the repeat before
    secrets.clear_caches()
    return [[(s.start, s.end) for s in find_secrets(f.text, ext=f.ext)[0] if s.kind != "email"] for f in files]


def peer(python: str, tool: str, files) -> tuple[list, float]:
    from evals.data import _pii_creddata as cd

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "files"
        folder.mkdir()
        for i, f in enumerate(files):
            (folder / f"{i:05d}{f.ext}").write_text(f.text, encoding="utf-8")
        cpu = str(sorted(os.sched_getaffinity(0))[0])
        done = subprocess.run(["taskset", "-c", cpu, python, str(REPO / "evals" / "data" / "_pii_code_peers.py"),
                               tool, str(folder), str(Path(tmp) / "out.json")], capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"{tool} failed: {done.stderr[-2000:]}")
        hits = json.loads((Path(tmp) / "out.json").read_text())
        timing = json.loads(done.stdout.strip().splitlines()[-1])
    spans = []
    for i, f in enumerate(files):
        starts = cd.line_starts(f.text)
        spans.append([(starts[n - 1], starts[n - 1] + 1) for n in hits.get(f"{i:05d}{f.ext}", [])
                      if 0 < n <= len(starts)])
    return spans, timing["seconds"], timing["cpu_seconds"]


def ours_cpu(files) -> float:
    """CPU seconds of ours over the files (steadier than wall time on a shared machine)."""
    import time

    ours(files[:5])
    start = time.process_time()
    ours(files)
    return time.process_time() - start


def main() -> None:
    from evals.data import _pii_creddata as cd

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=400,
                        help="N files spread evenly over the set in repository order, so every repository is in (0 = all)")
    parser.add_argument("--peer-python", default=os.environ.get("CIDERMILL_CODE_PEER_PYTHON", sys.executable))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    files, rows = cd.load(SHARED)
    order = sorted(range(len(files)), key=lambda i: (files[i].repo, files[i].id))
    step = max(1, len(order) // args.files) if args.files else 1
    keep = order[::step][:args.files] if args.files else order
    keep_set = set(keep)
    sub = [files[i] for i in keep]
    remap = {i: k for k, i in enumerate(keep)}
    sub_rows = [cd.Row(remap[r.file], r.line_start, r.line_end, r.truth, r.label, r.value_start, r.value_end)
                for r in rows if r.file in keep_set]
    n, mb = len(sub), sum(len(f.text) for f in sub) / 1e6
    print(f"\nCredentials in code: {n} CredData files ({mb:.1f} MB, {len({f.repo for f in sub})} repositories), "
          f"one core, load average {os.getloadavg()[0]:.1f}")
    seconds, rss, det = measure(ours, sub, warmup=(sub[:5],), repeats=args.repeats)
    results = [("ours: code_secrets_v3 (rules + model)", det, seconds, min(ours_cpu(sub) for _ in range(args.repeats)))]
    for tool in ("credsweeper", "detect-secrets"):
        results.append((tool, *peer(args.peer_python, tool, sub)))
    print(f"  {'':40s} {'files/s':>8s} {'(CPU)':>8s} {'recall':>7s} {'false-hit':>9s} {'recall, no UUID-only rows':>26s}")
    for name, d, secs, cpu in results:
        r = cd.score(sub, sub_rows, d)
        r2 = cd.score(sub, sub_rows, d, with_uuid=False)
        print(f"  {name:40s} {n / secs:8.1f} {n / cpu:8.1f} {r['recall']:7.3f} {r['false_hit_rate']:9.3f} "
              f"{r2['recall']:26.3f}")
    for name, _, secs, cpu in results[1:]:
        print(f"  ratio ours/{name}: {secs / results[0][2]:.1f}x files/s (wall), {cpu / results[0][3]:.1f}x (CPU)")
    print("  (recall and false hits here are in-sample for ours and for CredSweeper; see the docstring)")


if __name__ == "__main__":
    main()
