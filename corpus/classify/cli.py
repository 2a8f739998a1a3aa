"""`cidermill corpus train-classifier`: train the quality classifier from two dataset versions."""

from __future__ import annotations

import argparse
import json


def add_subcommand(csub: argparse._SubParsersAction) -> None:
    p = csub.add_parser("train-classifier", help="train the quality classifier from a positive and a negative version")
    p.add_argument("--positive", required=True, help="catalog ref of clean text (e.g. c4-clean)")
    p.add_argument("--negative", required=True,
                   help="catalog ref of raw pages (a text column, or HTML bytes: --field content)")
    p.add_argument("--out", required=True, help="artifact name; saved under <root>/models/<out>/<id>/")
    p.add_argument("--root", default="data/root", help="data root (catalog)")
    p.add_argument("--field", default="text", help="text column of the positive version")
    p.add_argument("--negative-field", help="column of the negative version (default: --field)")
    p.add_argument("--exclude", help="catalog ref whose document ids are left out of training "
                   "(score a version with a model that never saw its pages)")
    p.add_argument("--max-docs", type=int, help="at most this many documents per side")
    p.add_argument("--bits", type=int, default=18, help="log2 of the number of hashed n-gram buckets")
    p.add_argument("--max-n", type=int, default=2, help="word n-grams 1..max_n")
    p.add_argument("--l2", type=float, default=1e-4)
    p.set_defaults(func=cmd_train_classifier)


def cmd_train_classifier(args) -> int:
    from manifests.catalog import Catalog

    from .model import TrainParams
    from .train import train_classifier

    params = TrainParams(bits=args.bits, max_n=args.max_n, l2=args.l2)
    model = train_classifier(Catalog(args.root), positive=args.positive, negative=args.negative, out=args.out,
                             field=args.field, negative_field=args.negative_field, params=params,
                             max_docs=args.max_docs, exclude=args.exclude)
    m = model.manifest
    print(json.dumps({k: m[k] for k in ("name", "version_id", "metrics", "training_data")}, indent=1))
    print(f"saved {m['path']}")
    return 0
