"""`cidermill data ...`: list, show, verify and diff dataset versions in a catalog."""

from __future__ import annotations

import argparse
import json
import os
import sys

from .catalog import Catalog, diff_versions
from .errors import ManifestError

DEFAULT_ROOT = os.environ.get("CIDERMILL_ROOT", "data/root")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="dataset versions: ls, show, verify, diff, report")
    p.add_argument("--root", default=DEFAULT_ROOT, help="data root (path or URI; env CIDERMILL_ROOT)")
    dsub = p.add_subparsers(dest="data_cmd", required=True)
    ls = dsub.add_parser("ls", help="list versions")
    ls.add_argument("name", nargs="?")
    ls.set_defaults(func=cmd_ls)
    show = dsub.add_parser("show", help="print a version's manifest summary (or --json)")
    show.add_argument("ref", help="name, name@idprefix or idprefix")
    show.add_argument("--json", action="store_true", help="the whole manifest")
    show.set_defaults(func=cmd_show)
    verify = dsub.add_parser("verify", help="check the manifest digest and every shard (hash, schema, rows); exit 1 naming what is broken")
    verify.add_argument("ref")
    verify.set_defaults(func=cmd_verify)
    sign = dsub.add_parser("sign", help="verify every shard, then sign the manifest with the key in "
                           "CIDERMILL_MANIFEST_KEY / CIDERMILL_MANIFEST_KEY_FILE")
    sign.add_argument("ref", help="name@idprefix (a bare name signs the version it resolves to)")
    sign.set_defaults(func=cmd_sign)
    migrate = dsub.add_parser("migrate", help="move manifests of the older layout (<id>/manifest.json) beside "
                              "their folders (<id>.manifest.json), byte for byte, so each folder reads as Parquet")
    migrate.add_argument("--dry-run", action="store_true", help="list what would move, move nothing")
    migrate.set_defaults(func=cmd_migrate)
    diff = dsub.add_parser("diff", help="rows added/removed by id from A to B, and stats deltas")
    diff.add_argument("a")
    diff.add_argument("b")
    diff.add_argument("--ids", type=int, default=20, help="how many ids to print per side (-1: all)")
    diff.add_argument("--json", action="store_true")
    diff.set_defaults(func=cmd_diff)
    report = dsub.add_parser("report", help="write a self-contained HTML page: funnel, drop reasons with samples "
                                            "and their evidence, kept samples, histograms, lineage")
    report.add_argument("ref")
    report.add_argument("--vs", help="another version to diff against (rows added/removed by reason, stats)")
    report.add_argument("--out", default="reports", help="folder for the page (default: ./reports)")
    report.add_argument("--samples", type=int, default=5, help="sample rows per drop reason (and kept)")
    report.add_argument("--seed", type=int, default=0)
    report.set_defaults(func=cmd_report)


def cmd_ls(args) -> int:
    cat = Catalog(args.root)
    if args.name and args.name not in cat.names():
        import difflib

        names = cat.names()
        close = difflib.get_close_matches(args.name, names, n=1)
        fix = f"did you mean {close[0]!r}?" if close else f"names: {', '.join(sorted(names)) or '(none)'}"
        print(f"error: no dataset named {args.name!r} under {args.root}; {fix}", file=sys.stderr)
        return 1
    skipped: list = []
    entries = cat.versions(args.name, skipped=skipped)
    for bad in skipped[:5]:  # one bad manifest does not hide the others; it is named, not listed
        print(f"warning: not listed: {bad.uri}: {bad.reason}", file=sys.stderr)
    if len(skipped) > 5:
        print(f"warning: {len(skipped) - 5} more manifests do not check and are not listed", file=sys.stderr)
    if not entries:
        print(f"no versions under {args.root}")
        return 0
    print(f"{'name':32} {'version':14} {'rows':>10} {'MB':>9}  {'created':32}  kind")
    for e in entries:
        # an artifact's "rows" are not data rows (a tokenizer's one shard counts its vocabulary)
        rows = f"{'-':>10}" if e.kind == "tokenizer" else f"{e.rows:>10,}"
        print(f"{e.name:32} {e.version_id[:12]:14} {rows} {e.bytes / 1e6:>9.2f}  {e.created_at:32}  {e.kind}")
    return 0


def read_hint(v) -> list[str]:
    """How to read a version's rows: the version folder (Parquet shards only; the manifest lies beside it)
    with the usual readers. A catalog of the older layout gets the shards' subfolder (see `data migrate`)."""
    folder = v.data_folder
    if folder is None:
        return []
    d = folder.uri
    return [f"  data:      {d}",
            f"  read:      polars.scan_parquet({d!r})   pandas.read_parquet({d!r})",
            f"             pyarrow.dataset.dataset({d!r})",
            f"             datasets.load_dataset('parquet', data_dir={d!r})",
            f"             duckdb.sql(\"SELECT * FROM read_parquet('{d}/**/*.parquet')\")"]


def cmd_show(args) -> int:
    v = Catalog(args.root).resolve(args.ref)
    m = v.manifest
    if args.json:
        print(m.to_json(), end="")
        return 0
    print(f"{m.name}@{m.version_id}")
    print(f"  location:  {v.directory.uri}")
    older = "  (older layout: cidermill data migrate)" if v.legacy_layout else ""
    print(f"  manifest:  {v.manifest_loc.uri}{older}")
    print(f"  created:   {m.created_at}")
    kind = m.extra.get("kind", "dataset")
    if kind == "tokenizer":
        info = m.extra.get("tokenizer", {})
        print(f"  artifact:  tokenizer, vocabulary {info.get('vocab_size', m.rows):,}, "
              f"{len(m.shards)} file ({m.bytes / 1e6:.2f} MB)")
    else:
        print(f"  rows:      {m.rows:,} in {len(m.shards)} shards, {m.bytes / 1e6:.2f} MB"
              + (f", {m.tokens:,} tokens" if m.tokens is not None else ""))
    print(f"  parents:   {', '.join(p[:12] for p in m.parents) or '-'}")
    if m.pipeline:
        print(f"  pipeline:  {m.pipeline.name} (config {m.pipeline.config_sha256[:12]}, code {m.pipeline.code_revision[:16]})")
        for s in m.pipeline.stages:
            print(f"    - {s['name']} {json.dumps(s['config'], sort_keys=True)}")
    print(f"  schema:    {', '.join(f'{f.name}:{f.type}' for f in m.schema)}")
    if m.stats:
        print("  stats:")
        for s in m.stats:
            reasons = ", ".join(f"{k}={n}" for k, n in sorted(s.dropped.items()))
            print(f"    {s.name:28} in {s.rows_in:>9,} out {s.rows_out:>9,}  {reasons}")
    if m.errors:
        print(f"  errors ({len(m.errors)}):")
        for e in m.errors[:20]:
            print(f"    [{e.get('kind')}] {e.get('input')} {e.get('where', '')} {e.get('reason')}")
    if m.extra:
        print(f"  extra:     {json.dumps(m.extra, sort_keys=True)}")
    for line in read_hint(v):
        print(line)
    return 0


def cmd_verify(args) -> int:
    v = Catalog(args.root).resolve(args.ref)
    problems = v.verify()
    if not problems:
        print(f"ok: {v.name}@{v.version_id[:12]}: {len(v.manifest.shards)} shards match their sha256, "
              f"schema and row counts" + ("" if v.unprotected else "; the manifest digest matches"))
        if v.unprotected:
            print("note: schema_version 1 manifest (written before digests): edits to its fields cannot be "
                  "detected; republish the version to protect it", file=sys.stderr)
        return 0
    for p in problems:
        print(f"BROKEN {v.directory.uri}/{p.path}: {p.reason}", file=sys.stderr)
    return 1


def cmd_sign(args) -> int:
    from .signing import KEY_ENV, KEY_FILE_ENV, manifest_key

    if manifest_key() is None:
        print(f"error: no manifest key: set {KEY_ENV} or {KEY_FILE_ENV}", file=sys.stderr)
        return 2
    v = Catalog(args.root).sign(args.ref)
    print(f"signed: {v.name}@{v.version_id[:12]} (every shard verified first)")
    return 0


def cmd_migrate(args) -> int:
    moved = Catalog(args.root).migrate_layout(dry_run=args.dry_run)
    for ref in moved:
        print(f"{'would move' if args.dry_run else 'moved'}: {ref}")
    print(f"{len(moved)} manifest(s) {'to move' if args.dry_run else 'moved'} beside their version folders under "
          f"{args.root}" + ("" if moved else " (the catalog has the current layout)"))
    return 0


def cmd_diff(args) -> int:
    cat = Catalog(args.root)
    d = diff_versions(cat.resolve(args.a), cat.resolve(args.b))
    if args.json:
        print(json.dumps(d.__dict__, indent=1))
        return 0
    n = None if args.ids < 0 else args.ids
    print(f"{d.a[:12]} ({d.rows_a:,} rows) -> {d.b[:12]} ({d.rows_b:,} rows)")
    print(f"added {len(d.added_ids):,} ids, removed {len(d.removed_ids):,} ids")
    for rid in d.added_ids[:n]:
        print(f"  + {rid}")
    for rid in d.removed_ids[:n]:
        print(f"  - {rid}")
    for s in d.stats_delta:
        changes = {k: v for k, v in s["dropped"].items() if v}
        if s["rows_out"] or changes:
            print(f"  stage {s['stage']}: kept {s['rows_out']:+,}  dropped {changes}")
    return 0


def cmd_report(args) -> int:
    from .report import write_report

    page = write_report(Catalog(args.root), args.ref, args.out, samples=args.samples, seed=args.seed, vs=args.vs)
    print(f"report: {page}")
    return 0


def main(argv: list[str] | None = None) -> int:  # for `python -m manifests.cli`, no engine needed
    parser = argparse.ArgumentParser(prog="cidermill")
    sub = parser.add_subparsers(dest="group", required=True)
    add_parser(sub)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ManifestError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
