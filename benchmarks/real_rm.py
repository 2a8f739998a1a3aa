"""Reward model on the real base (SmolLM2-135M-Instruct, imported) against the bag-of-words baseline, on the
shipped preference pairs.

    nice -n 10 .venv/bin/python benchmarks/real_rm.py --work out/realbase [--init CKPT --steps 100 ...]

Pairs: data/samples/preference (hh-rlhf harmless 2,312, AlpacaEval weighted 250, LLaMA-Factory DPO 300),
each source split 70 / 10 / 20 (seeded) into train / dev / test files. The RM (`train rm`, last-token
scalar head, soft Bradley-Terry over the preference levels) trains on train only; the checkpoint kept among
the `--save-every` ones is the one with the best dev accuracy; test pairs serve the printed figures only.
The baseline (benchmarks/post_rm_baseline.bow_accuracy: logistic regression on chosen - rejected binary
word unigrams, C chosen on a slice of its training pairs) trains on the same train pairs and is scored on
the same test pairs. Printed: test accuracy of both with Wilson 95% intervals, overall and per source, the
paired bootstrap interval of RM - BoW, and the RM's accuracy / mean σ(Δ) / ECE per preference level.
Only the top `--trainable-layers` layers and the head train (CPU budget); `--init` defaults to the imported
base (the RM recipe usually starts from the SFT model: pass `<work>/sft/chosen`'s path to do so).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
from pathlib import Path

import numpy as np

from real_common import Clock, REPO, base_checkpoint, load_line, paired_bootstrap, setup_threads, split, wilson, write_jsonl

SOURCES = [("hh_rlhf", REPO / "data/samples/preference/hh_rlhf/harmless-base_test.jsonl.gz"),
           ("alpaca_eval", REPO / "data/samples/preference/alpaca_eval/fusechat_weighted.json.gz"),
           ("llamafactory", REPO / "data/samples/preference/llamafactory/dpo_en_demo.json.gz")]


def split_files(work: Path) -> dict[str, list[tuple[str, str]]]:
    """{part: [(format, file)]} with each source split 70/10/20 by a seeded shuffle of its records."""
    from training.post_loop import read_records

    out: dict[str, list] = {"train": [], "dev": [], "test": []}
    for fmt, path in SOURCES:
        target = {part: work / "rm" / "data" / f"{fmt}.{part}.jsonl" for part in out}
        if not all(t.exists() for t in target.values()):  # written once; other scripts read the same split
            parts = split(read_records(path), {"train": 0.7, "dev": 0.1, "test": 0.2}, seed=0)
            for part, rows in parts.items():
                write_jsonl(target[part], rows)
        for part in out:
            out[part].append((fmt, str(target[part])))
    return out


def pair_items(cfg, files: list[tuple[str, str]], tokenizer) -> list:
    """Every usable pair of `files`, tokenized as the RM trains on them (prefs.load_pairs' reading)."""
    from training.post_config import SourceConfig
    from training.prefs import load_pairs

    c = dataclasses.replace(cfg, valid_max=10 ** 9, data=dataclasses.replace(
        cfg.data, sources=tuple(SourceConfig(path=p, format=f) for f, p in files), valid_fraction=0.5))
    train, valid, _ = load_pairs(c, tokenizer)
    return train + valid


def rm_deltas(model, cfg, items, pad_id: int, *, batch: int = 8) -> tuple[list[float], list[int]]:
    import torch

    from training import parallel
    from training.prefs import pair_batch

    deltas, levels = [], []
    with torch.no_grad():
        for at in range(0, len(items), batch):
            chunk = items[at: at + batch]
            b = {k: v.to(parallel.device()) for k, v in pair_batch(chunk, cfg.seq_length, pad_id).items()}
            r, _ = model(b)
            deltas += (r[: len(chunk)] - r[len(chunk):]).tolist()
            levels += b["level"].tolist()
    return deltas, levels


def correct(deltas) -> np.ndarray:
    d = np.asarray(deltas)
    return np.where(d > 0, 1.0, np.where(d == 0, 0.5, 0.0))


def sample(items: list, n: int) -> list:
    """`n` of `items` (all when n is 0 or more than there are), drawn with a fixed seed, in their order."""
    if not n or n >= len(items):
        return items
    keep = sorted(random.Random(0).sample(range(len(items)), n))
    return [items[i] for i in keep]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--work", default="out/realbase")
    p.add_argument("--init", help="checkpoint to start from (default: the imported base)")
    p.add_argument("--steps", type=int, default=80)
    p.add_argument("--batch", type=int, default=8, help="pairs per step")
    p.add_argument("--seq", type=int, default=160)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--trainable-layers", type=int, default=6)
    p.add_argument("--head-lr-mult", type=float, default=1.0, help="rm.head_lr_mult: the heads' lr = --lr x this")
    p.add_argument("--pooling", choices=("last", "mean"), default="last", help="rm.pooling")
    p.add_argument("--head-init", choices=("zeros", "probe"), default="zeros",
                   help="rm.head_init: probe = fit the head on the frozen body's states of every train pair first")
    p.add_argument("--warmup", type=int, default=10, help="warm-up steps of the lr schedule")
    p.add_argument("--save-every", type=int, default=20)
    p.add_argument("--dev-max", type=int, default=100, help="dev pairs scored per checkpoint")
    p.add_argument("--test-max", type=int, default=0, help="0: every test pair")
    args = p.parse_args()
    setup_threads()

    from post_rm_baseline import bow_accuracy
    from training.chat import load_tokenizer
    from training.post_config import from_dict
    from training.pref_eval import format_report, pairwise_report
    from training.reward import load_reward_model, train_rm

    work = Path(args.work)
    clock = Clock()
    print(f"start: {load_line()}", flush=True)
    init = Path(args.init) if args.init else base_checkpoint(work)
    files = split_files(work)
    cfg = from_dict({
        "name": "real-rm", "method": "rm", "model": {"shape": "checkpoint"}, "tokenizer": "checkpoint",
        "init_from": str(init), "data": {"sources": [{"path": f, "format": fmt} for fmt, f in files["train"]],
                                         "valid_fraction": 0.02, "seed": 0},
        "seq_length": args.seq, "global_batch": args.batch, "micro_batch": min(4, args.batch), "steps": args.steps,
        "save_every": args.save_every, "trainable_layers": args.trainable_layers, "valid_max": 16,
        "rm": {"pooling": args.pooling, "head_lr_mult": args.head_lr_mult, "head_init": args.head_init},
        "optim": {"name": "adamw", "peak_lr": args.lr, "warmup_steps": args.warmup, "final_fraction": 0.1,
                  "weight_decay": 0.0},
        "out_dir": str(work / "rm" / "run"), "log_every": 10, "seed": 0}, where="real_rm")
    tokenizer = load_tokenizer(cfg.tokenizer)
    train_items = pair_items(cfg, files["train"], tokenizer)
    # a cap takes a seeded sample, not the first pairs (the files come source by source)
    dev_items = sample(pair_items(cfg, files["dev"], tokenizer), args.dev_max)
    test_items = sample(pair_items(cfg, files["test"], tokenizer), args.test_max)
    result = train_rm(cfg)
    clock.mark("rm training")

    dev = {}
    for c in sorted(Path(cfg.out_dir).glob("step-*")):
        if (c / "checkpoint.json").exists():
            model, _ = load_reward_model(str(c))
            dev[str(c)] = float(correct(rm_deltas(model, cfg, dev_items, tokenizer.pad_id)[0]).mean())
    chosen = max(dev, key=lambda c: (dev[c], c))
    print("dev accuracy per checkpoint: " + ", ".join(f"{Path(c).name} {v:.3f}" for c, v in dev.items())
          + f" -> {Path(chosen).name}", flush=True)
    clock.mark("dev")
    model, _ = load_reward_model(chosen)
    deltas, levels = rm_deltas(model, cfg, test_items, tokenizer.pad_id)
    clock.mark("test")
    unique = list({id(it): it for it in train_items}.values())
    rm, bow = correct(deltas), bow_accuracy(unique, test_items)
    lo, hi = paired_bootstrap(list(bow), list(rm))
    print(f"\nRM from {init} ({args.steps} steps x {args.batch} pairs, seq {args.seq}, top {args.trainable_layers} "
          f"layers, lr {args.lr}, head lr x{args.head_lr_mult}, {args.pooling} pooling, head init {args.head_init}; "
          f"kept {Path(chosen).name} "
          f"by dev accuracy on {len(dev_items)} pairs); "
          f"BoW trained on {len(unique)} pairs; training {result.seconds:.0f} s")
    print("| test pairs | n | RM accuracy (95% CI) | BoW accuracy (95% CI) | RM - BoW |\n|---|---|---|---|---|")
    sources = sorted({Path(it.pair.source).name.split(".")[0] for it in test_items})
    for name in ["all"] + sources:
        mask = np.array([name == "all" or Path(it.pair.source).name.startswith(name + ".") for it in test_items])
        n = int(mask.sum())
        ra, rb = wilson(rm[mask].sum(), n), wilson(bow[mask].sum(), n)
        print(f"| {name} | {n} | {rm[mask].mean():.3f} ({ra[0]:.3f}-{ra[1]:.3f}) | {bow[mask].mean():.3f} "
              f"({rb[0]:.3f}-{rb[1]:.3f}) | {rm[mask].mean() - bow[mask].mean():+.3f} |")
    print(f"RM - BoW on all test pairs: {rm.mean() - bow.mean():+.3f}, paired bootstrap 95% [{lo:+.3f}, {hi:+.3f}]; "
          f"goal >= +0.05: {'met' if rm.mean() - bow.mean() >= 0.05 else 'NOT met'}")
    report = pairwise_report(deltas, levels, cfg.rm.level_probs)
    print("RM calibration per preference level (test):\n" + format_report(report))
    print(f"timings (s): {json.dumps({k: round(v) for k, v in clock.marks.items()})}; end: {load_line()}")
    out = work / "rm"
    (out / "chosen").write_text(chosen)
    (out / "result.json").write_text(json.dumps({"args": vars(args), "chosen": chosen, "dev": dev,
                                                 "rm_accuracy": rm.mean(), "bow_accuracy": bow.mean(),
                                                 "diff_ci95": [lo, hi], "report": report,
                                                 "timings": clock.marks}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
