"""`cidermill quantize ...`: palettize a checkpoint. Thin: parse, call, print."""

from __future__ import annotations


def add_parser(sub) -> None:
    p = sub.add_parser("quantize", help="palettization (k-means LUTs, mixed 2/4-bit) and recovery adapters")
    qsub = p.add_subparsers(dest="quantize_cmd", required=True)
    pal = qsub.add_parser("palettize", help="k-means LUT palettization of a checkpoint to a target bits/weight")
    pal.add_argument("checkpoint", help="checkpoint directory (or a run directory: its newest checkpoint)")
    pal.add_argument("--bpw", type=float, default=3.6, help="target bits per weight over the linear layers")
    pal.add_argument("--group-size", type=int, default=16, help="output channels sharing one lookup table")
    pal.add_argument("--seed", type=int, default=0, help="k-means++ seed")
    pal.add_argument("--calib-samples", type=int, default=16, help="training-split samples for sensitivity")
    pal.add_argument("--out", required=True, help="directory to write")
    pal.set_defaults(func=cmd_palettize)


def cmd_palettize(args) -> int:
    from .palettize import PalettizeConfig, palettize_checkpoint

    palettize_checkpoint(args.checkpoint, args.out, PalettizeConfig(
        bpw=args.bpw, group_size=args.group_size, seed=args.seed, calib_samples=args.calib_samples))
    return 0
