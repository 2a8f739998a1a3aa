"""Check that a speed change left our side of the end-to-end benchmark's outputs exactly as they were.

    # once, on the code before the change (the benchmark's input: web_end_to_end.py --work DIR --keep)
    .venv/bin/python benchmarks/e2e_same_outputs.py --warc-dir DIR/input --save before.json
    # after the change
    .venv/bin/python benchmarks/e2e_same_outputs.py --warc-dir DIR/input --compare before.json

Runs `configs/web.yaml` (benchmarks/e2e_ours.py) with 1 worker on the WARC files and records every output a
user sees: the kept records' ids and texts, every reject's stage, reason and `drop_detail`, the per-stage row
counts and counters, and the published version id. `--compare` prints each difference and exits 1 on any.
`--no-timeout` (give it to both runs) lifts the extractor's per-page wall-clock limit, so a busy machine
cannot turn a slow page into an `extract_timeout` on one side only (seen at load 6-12).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]


def outputs(warc_dir: str, workers: int = 1, *, no_timeout: bool = False) -> dict:
    import e2e_ours

    with tempfile.TemporaryDirectory(prefix="cm-same-") as work:
        config = e2e_ours.CONFIG
        if no_timeout:
            text = config.read_text()
            if "timeout_s: 5.0" not in text:
                raise SystemExit(f"{config}: no `timeout_s: 5.0` to lift")
            config = Path(work) / "web-no-timeout.yaml"
            config.write_text(text.replace("timeout_s: 5.0", "timeout_s: 0"))
        report = e2e_ours.run(warc_dir, work, workers=workers, config=config)
        kept, dropped = e2e_ours.kept_and_dropped(report)
    stats = {s["name"]: {"rows_in": s["rows_in"], "rows_out": s["rows_out"], "dropped": s["dropped"],
                         "counters": s.get("counters", {})} for s in report["stats"]}
    return {"version": report["version"].rstrip("/").rsplit("/", 1)[-1], "kept": kept,
            "dropped": {k: list(v) for k, v in dropped.items()}, "stats": stats}


def differences(before: dict, after: dict, limit: int = 20) -> list[str]:
    out = []
    if before["version"] != after["version"]:
        out.append(f"version id {before['version']} -> {after['version']}")
    for key in ("kept", "dropped"):
        b, a = before[key], after[key]
        for rid in sorted(set(b) | set(a)):
            if b.get(rid) != a.get(rid):
                out.append(f"{key} {rid}: {str(b.get(rid))[:120]!r} -> {str(a.get(rid))[:120]!r}")
    for name in sorted(set(before["stats"]) | set(after["stats"])):
        if before["stats"].get(name) != after["stats"].get(name):
            out.append(f"stage {name}: {before['stats'].get(name)} -> {after['stats'].get(name)}")
    return out[:limit] + ([f"... {len(out) - limit} more"] if len(out) > limit else [])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--warc-dir", required=True, help="the benchmark's input folder (*.warc.gz)")
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", help="write the outputs here (JSON)")
    group.add_argument("--compare", help="compare with outputs saved earlier")
    ap.add_argument("--no-timeout", action="store_true", help="no per-page time limit in extraction (both runs)")
    args = ap.parse_args()
    now = outputs(args.warc_dir, no_timeout=args.no_timeout)
    print(f"version {now['version']}, kept {len(now['kept']):,}, dropped {len(now['dropped']):,}")
    if args.save:
        Path(args.save).write_text(json.dumps(now, sort_keys=True))
        return 0
    diffs = differences(json.loads(Path(args.compare).read_text()), now)
    print("\n".join(diffs) if diffs else "identical: version id, kept ids and texts, rejects with reasons and "
          "drop_detail, per-stage counts and counters")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
