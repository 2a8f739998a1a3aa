"""DPO / IPO from the SFT model of the real base (benchmarks/real_sft.py), judged by its held-out implicit reward
and by the reward model of benchmarks/real_rm.py on held-out prompts.

    nice -n 10 .venv/bin/python benchmarks/real_dpo.py --work out/realbase [--loss dpo --beta 0.1 ...]

Pairs: the hh-rlhf harmless split of real_rm.py (train / dev / test = 70 / 10 / 20, seeded): DPO trains on the
first `--train-max` train pairs (the reference log-probs of the SFT model are computed once for them); the
checkpoint kept among the `--save-every` ones has the best dev implicit-reward accuracy; test pairs and test
prompts are used for the printed figures only.
- implicit-reward accuracy on test pairs: β·[(log π − log π_ref)(chosen) − (…)(rejected)] > 0 (ties ½); the SFT
  model is the reference, so before DPO every margin is 0 and the accuracy is 0.5 by construction;
- generation: greedy answers (at most `--max-new` tokens, the checkpoint's chat format) of the SFT and the DPO model to
  the first `--prompts` test prompts, scored by the RM (<work>/rm/chosen, trained on the train split only);
  win rate = share of prompts where the RM scores the DPO answer higher (ties ½), with a Wilson interval.
  `--rm none` skips the generation and the judge (the implicit-reward figures only); `--sft base` starts from the
  imported base itself (SmolLM2-135M-Instruct is already instruction-tuned; say so where the figure is used).
- `--confirm`: the test pairs after the first `--test-max` (never printed by a run without it) are scored too, as
  a confirmation set reported on its own: a result first seen on the first `--test-max` pairs is confirmed only
  if that set's Wilson interval lies above 0.5 by itself.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from real_common import Clock, base_checkpoint, generate, load_line, setup_threads, wilson
from real_rm import pair_items, split_files


def implicit_accuracy(cfg, policy, reference, items, pad_id) -> tuple[float, float]:
    """(accuracy, mean margin) of the DPO implicit reward on `items` (ties ½)."""
    from training.dpo import _lengths, _logps, preference_figures

    pc, pr = _logps(policy, items, cfg, pad_id)
    rc, rr = _logps(reference, items, cfg, pad_id)
    f = preference_figures(cfg, pc, pr, rc, rr, *_lengths(items))
    return f["preference_accuracy"], f["reward_margin"]


def judge(args, sft: str, chosen: str, rm: str | None, prompts: list, clock: Clock) -> dict | None:
    """Greedy answers of the SFT and the DPO model to `prompts`, scored by the RM; None without an RM."""
    if rm is None:
        return None
    if callable(rm):
        rm = rm()
    from training.rewards.model import RewardModelScorer

    sft_answers, sft_ended = generate(sft, prompts, max_new_tokens=args.max_new)
    dpo_answers, dpo_ended = generate(chosen, prompts, max_new_tokens=args.max_new)
    clock.mark("generation")
    scorer = RewardModelScorer(rm)
    r_sft = scorer.score(list(zip(prompts, sft_answers)))
    r_dpo = scorer.score(list(zip(prompts, dpo_answers)))
    clock.mark("rm scoring")
    k = len(prompts)
    return {"k": k, "wins": sum(1.0 if b > a else 0.5 if b == a else 0.0 for a, b in zip(r_sft, r_dpo)),
            "rm_sft": r_sft, "rm_dpo": r_dpo, "sft_ended": sum(sft_ended) / k, "dpo_ended": sum(dpo_ended) / k,
            "identical": sum(a == b for a, b in zip(sft_answers, dpo_answers)),
            "answers": list(zip(sft_answers, dpo_answers))}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--work", default="out/realbase")
    p.add_argument("--sft", help="SFT checkpoint (default: <work>/sft/chosen; 'base': the imported base)")
    p.add_argument("--rm", help="RM checkpoint (default: <work>/rm/chosen; 'none': no generation or judge)")
    p.add_argument("--loss", choices=["dpo", "ipo"], default="dpo")
    p.add_argument("--beta", type=float, default=0.1)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=8, help="pairs per step")
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--trainable-layers", type=int, default=10)
    p.add_argument("--train-max", type=int, default=320)
    p.add_argument("--save-every", type=int, default=20)
    p.add_argument("--dev-max", type=int, default=60)
    p.add_argument("--test-max", type=int, default=150)
    p.add_argument("--confirm", action="store_true",
                   help="also score the test pairs after the first --test-max, reported as a separate set")
    p.add_argument("--prompts", type=int, default=60)
    p.add_argument("--max-new", type=int, default=96)
    args = p.parse_args()
    setup_threads()

    from training import parallel
    from training.chat import load_tokenizer
    from training.dpo import train_dpo
    from training.post_config import from_dict
    from training.post_loop import build_gpt

    work = Path(args.work)
    clock = Clock()
    print(f"start: {load_line()}", flush=True)
    base = base_checkpoint(work)
    sft = str(base) if args.sft == "base" else args.sft or (work / "sft" / "chosen").read_text().strip()
    # read when judging, so a reward model still training in the same work folder can be used
    rm = None if args.rm == "none" else args.rm or (lambda: (work / "rm" / "chosen").read_text().strip())
    files = {part: [(f, p) for f, p in v if f == "hh_rlhf"] for part, v in split_files(work).items()}
    name = f"real-{args.loss}"
    cfg = from_dict({
        "name": name, "method": "dpo", "model": {"shape": "checkpoint"}, "tokenizer": "checkpoint",
        "init_from": sft, "dpo": {"loss": args.loss, "beta": args.beta, "cache_dir": str(work / "dpo" / "ref-cache")},
        "data": {"sources": [{"path": files["train"][0][1], "format": "hh_rlhf", "max_records": args.train_max}],
                 "valid_fraction": 0.05, "seed": 0},
        "seq_length": args.seq, "global_batch": args.batch, "micro_batch": min(4, args.batch), "steps": args.steps,
        "save_every": args.save_every, "trainable_layers": args.trainable_layers, "valid_max": 16,
        "optim": {"name": "adamw", "peak_lr": args.lr, "warmup_steps": 5, "final_fraction": 0.1, "weight_decay": 0.0},
        "out_dir": str(work / "dpo" / name), "log_every": 10, "seed": 0}, where="real_dpo")
    tokenizer = load_tokenizer(cfg.tokenizer)
    dev_items = pair_items(cfg, files["dev"], tokenizer)[: args.dev_max]
    all_test = pair_items(cfg, files["test"], tokenizer)
    test_items = all_test[: args.test_max]
    confirm_items = all_test[args.test_max:] if args.confirm else []
    result = train_dpo(cfg)
    clock.mark("dpo training")

    parallel.setup(cfg.parallel)
    reference = build_gpt(dataclasses.replace(cfg, trainable_layers=0), init_from=sft).eval()
    dev = {}
    for c in sorted(Path(cfg.out_dir).glob("step-*")):
        if (c / "checkpoint.json").exists():
            policy = build_gpt(dataclasses.replace(cfg, trainable_layers=0), init_from=str(c)).eval()
            dev[str(c)] = implicit_accuracy(cfg, policy, reference, dev_items, tokenizer.pad_id)[0]
    chosen = max(dev, key=lambda c: (dev[c], c))
    print("dev implicit-reward accuracy per checkpoint: " + ", ".join(f"{Path(c).name} {v:.3f}" for c, v in dev.items())
          + f" -> {Path(chosen).name}", flush=True)
    policy = build_gpt(dataclasses.replace(cfg, trainable_layers=0), init_from=chosen).eval()
    acc, margin = implicit_accuracy(cfg, policy, reference, test_items, tokenizer.pad_id)
    n = len(test_items)
    confirm = implicit_accuracy(cfg, policy, reference, confirm_items, tokenizer.pad_id) if confirm_items else None
    clock.mark("implicit reward")
    del policy, reference

    judged = judge(args, sft, chosen, rm, [it.pair.prompt for it in test_items[: args.prompts]], clock)
    print(f"\n{args.loss.upper()} (beta {args.beta}) from {sft}: {len(result.losses)} steps x {args.batch} pairs, seq "
          f"{args.seq}, top {args.trainable_layers} layers, lr {args.lr}, kept {Path(chosen).name} by dev accuracy "
          f"on {len(dev_items)} pairs; training {result.seconds:.0f} s")
    print("| held-out figure | SFT (reference) | after DPO |\n|---|---|---|")
    lo, hi = wilson(acc * n, n)
    print(f"| implicit-reward accuracy, {n} test pairs | 0.500 (margin 0 by construction) | {acc:.3f} "
          f"({lo:.3f}-{hi:.3f}), mean margin {margin:+.3f} |")
    if confirm:
        m = len(confirm_items)
        clo, chi = wilson(confirm[0] * m, m)
        print(f"| implicit-reward accuracy, {m} confirmation test pairs (after the first {n}) | 0.500 | "
              f"{confirm[0]:.3f} ({clo:.3f}-{chi:.3f}), mean margin {confirm[1]:+.3f} |")
    if judged:
        k, wins, r_sft, r_dpo = judged["k"], judged["wins"], judged["rm_sft"], judged["rm_dpo"]
        wl, wh = wilson(wins, k)
        print(f"| RM win rate of DPO answers over SFT answers, {k} test prompts | - | {wins / k:.3f} "
              f"({wl:.3f}-{wh:.3f}) |")
        print(f"| mean RM score of the answers | {sum(r_sft) / k:+.3f} | {sum(r_dpo) / k:+.3f} |")
        print(f"| answers that end by themselves | {judged['sft_ended']:.3f} | {judged['dpo_ended']:.3f} |")
        print(f"| identical answers | {judged['identical']}/{k} | |")
    print(f"timings (s): {json.dumps({k: round(v) for k, v in clock.marks.items()})}; end: {load_line()}")
    (work / "dpo" / f"{name}-result.json").write_text(json.dumps({
        "args": vars(args), "chosen": chosen, "dev": dev, "implicit_accuracy": acc, "margin": margin,
        "confirm": None if confirm is None else {"pairs": len(confirm_items), "accuracy": confirm[0],
                                                  "margin": confirm[1]},
        "judge": judged, "timings": clock.marks}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
