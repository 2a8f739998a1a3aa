"""MDLOO on the real base (SmolLM2-135M-Instruct, imported) on a verifiable task: sums of two numbers in
0..`--max-addend` (99).

    nice -n 10 .venv/bin/python benchmarks/real_mdloo.py --work out/realbase [--iterations 10 ...]

The base answers "What is 23 + 45?" in sentences (in ChatML, its own format, since the fifth session; before, in our template); a short SFT
warm start on `--sft-examples` worked sums can teach the bare-number format (as the recipe's tiny demo does);
that SFT model is then the MDLOO init and its frozen reference (`--sft-steps 0`: the base is both; on
SmolLM2-135M 16 warm-start steps collapsed every answer to one or two numbers, see docs/training.md). Addend
pairs are drawn without replacement, so the SFT examples, the RL prompts, the dev prompts and the test prompts are disjoint sums. MDLOO (training/rl_loop.py:
n responses per prompt, leave-one-out advantage of the math rule reward minus β·KL to the reference,
mirror-descent updates) trains on the RL prompts; the checkpoint kept among the `--save-every` ones has the
best greedy dev accuracy (the init when none beats it there); the test prompts give the printed accuracy (greedy, Wilson intervals, paired
bootstrap of the change) and nothing else. KL to the reference: the loop's sequence-level k1 estimate per
iteration (mean over responses), printed with the rewards.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from real_common import Clock, base_checkpoint, generate, load_line, paired_bootstrap, setup_threads, wilson, write_jsonl


def sums(n_total: int, *, seed: int, max_addend: int = 99) -> list[tuple[int, int]]:
    pairs = [(a, b) for a in range(max_addend + 1) for b in range(max_addend + 1)]
    if n_total > len(pairs):
        raise SystemExit(f"real_mdloo: {n_total} disjoint sums asked for, but addends 0..{max_addend} give only "
                         f"{len(pairs)}")
    random.Random(seed).shuffle(pairs)
    return pairs[:n_total]


def micro_batch_for(global_batch: int, cap: int = 32) -> int:
    """The largest micro-batch <= cap that divides the global batch (the trainer requires a multiple)."""
    return max(d for d in range(1, min(cap, global_batch) + 1) if global_batch % d == 0)


def record(a: int, b: int, *, answer: bool) -> dict:
    msgs = [{"role": "user", "content": f"What is {a} + {b}?"}]
    if answer:
        msgs.append({"role": "assistant", "content": str(a + b)})
    return {"messages": msgs, "answer": str(a + b)}


def accuracy(checkpoint, records: list[dict], *, max_new: int, show: int = 0) -> list[float]:
    from training.rl_tasks import answer_reward

    texts, _ = generate(checkpoint, [r["messages"] for r in records], max_new_tokens=max_new, batch=32)
    for t, r in list(zip(texts, records))[:show]:  # a few responses, to see what the accuracy counts
        print(f"  {r['messages'][0]['content']!r} -> {t!r} (answer {r['answer']})", flush=True)
    return [answer_reward(t, r["answer"]) for t, r in zip(texts, records)]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--work", default="out/realbase")
    p.add_argument("--sft-examples", type=int, default=300)
    p.add_argument("--sft-steps", type=int, default=20, help="0: no warm start, MDLOO from the base")
    p.add_argument("--rl-prompts", type=int, default=400)
    p.add_argument("--dev", type=int, default=60)
    p.add_argument("--test", type=int, default=150)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--prompts-per-iteration", type=int, default=8)
    p.add_argument("--responses", type=int, default=8)
    p.add_argument("--inner-steps", type=int, default=2)
    p.add_argument("--kl-coef", type=float, default=0.05)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--trainable-layers", type=int, default=10)
    p.add_argument("--save-every", type=int, default=5)
    p.add_argument("--max-new", type=int, default=8)
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of the rollouts")
    p.add_argument("--max-addend", type=int, default=99, help="addends are drawn from 0..max-addend")
    args = p.parse_args()
    setup_threads()

    from training.mdloo_config import from_raw
    from training.post_config import from_dict
    from training.rl_loop import train_mdloo
    from training.sft import train_sft

    work = Path(args.work)
    out = work / "mdloo"
    clock = Clock()
    print(f"start: {load_line()}", flush=True)
    base = base_checkpoint(work)
    pairs = sums(args.sft_examples + args.rl_prompts + args.dev + args.test, seed=0, max_addend=args.max_addend)
    cut = [args.sft_examples, args.sft_examples + args.rl_prompts, args.sft_examples + args.rl_prompts + args.dev]
    sft_rows = [record(a, b, answer=True) for a, b in pairs[: cut[0]]]
    rl_rows = [record(a, b, answer=False) for a, b in pairs[cut[0]: cut[1]]]
    dev_rows = [record(a, b, answer=False) for a, b in pairs[cut[1]: cut[2]]]
    test_rows = [record(a, b, answer=False) for a, b in pairs[cut[2]:]]
    files = {k: write_jsonl(out / "data" / f"{k}.jsonl", v) for k, v in
             (("sft", sft_rows), ("rl", rl_rows), ("dev", dev_rows), ("test", test_rows))}
    common = {"model": {"shape": "checkpoint"}, "tokenizer": "checkpoint", "seed": 0, "log_every": 1,
              "trainable_layers": args.trainable_layers}
    if args.sft_steps:
        init = train_sft(from_dict({
            **common, "name": "real-arith-sft", "method": "sft", "init_from": str(base), "seq_length": 128,
            "global_batch": 16, "micro_batch": 16, "steps": args.sft_steps, "out_dir": str(out / "sft"),
            "data": {"sources": [{"path": files["sft"]}], "valid_fraction": 0.05},
            "optim": {"name": "adamw", "peak_lr": 1e-4, "warmup_steps": 2, "final_fraction": 0.1,
                      "weight_decay": 0.0}}, where="real_mdloo sft")).checkpoint
        clock.mark("sft warm start")
    else:  # --sft-steps 0: MDLOO starts from the base itself (its reference too)
        init = base
    before = accuracy(init, test_rows, max_new=args.max_new, show=6)
    base_acc = accuracy(base, test_rows[:40], max_new=args.max_new, show=6) if args.sft_steps else before[:40]
    clock.mark("before")
    print(f"test accuracy: base (first 40) {sum(base_acc) / len(base_acc):.3f}, MDLOO init "
          f"({'SFT warm start' if args.sft_steps else 'the base'}) {sum(before) / len(before):.3f}", flush=True)

    run = from_raw({
        **common, "name": "real-arith-mdloo", "method": "mdloo", "init_from": str(init), "seq_length": 64,
        "data": {"sources": [{"path": files["rl"]}], "valid_fraction": 0.05},
        "global_batch": args.prompts_per_iteration * args.responses,
        "micro_batch": micro_batch_for(args.prompts_per_iteration * args.responses), "steps": args.iterations,
        "save_every": args.save_every, "out_dir": str(out / "rl"),
        "optim": {"name": "adamw", "peak_lr": args.lr, "warmup_steps": 0, "final_fraction": 1.0, "weight_decay": 0.0},
        "mdloo": {"prompts_per_iteration": args.prompts_per_iteration, "responses_per_prompt": args.responses,
                  "inner_steps": args.inner_steps, "kl_coef": args.kl_coef, "trust_region": 1.0, "max_staleness": 0,
                  "max_new_tokens": args.max_new, "temperature": args.temperature, "eval_prompts": 16}}, where="real_mdloo")
    result = train_mdloo(run)
    clock.mark("mdloo")
    dev = {}
    for c in sorted((out / "rl").glob("step-*")):
        if (c / "checkpoint.json").exists():
            dev[str(c)] = sum(accuracy(c, dev_rows, max_new=args.max_new)) / len(dev_rows)
    dev_sft = sum(accuracy(init, dev_rows, max_new=args.max_new)) / len(dev_rows)
    # the init stays a candidate: a run whose checkpoints all score below it on dev keeps the init
    chosen = max(dev, key=lambda c: (dev[c], c))
    if dev[chosen] <= dev_sft:
        chosen = str(init)
    print(f"dev accuracy: init {dev_sft:.3f}; " + ", ".join(f"{Path(c).name} {v:.3f}" for c, v in dev.items())
          + f" -> {Path(chosen).name}", flush=True)
    after = accuracy(chosen, test_rows, max_new=args.max_new, show=6)
    clock.mark("after")

    n = len(test_rows)
    lo, hi = paired_bootstrap(before, after)
    kb, ka = sum(before), sum(after)
    print(f"\nMDLOO: {args.iterations} iterations x {args.prompts_per_iteration} prompts x {args.responses} responses, "
          f"{args.inner_steps} mirror-descent steps, beta {args.kl_coef}, lr {args.lr}, top {args.trainable_layers} "
          f"layers; kept {Path(chosen).name} by dev accuracy")
    print("| held-out (test sums, greedy) | MDLOO init | after MDLOO | change (95% CI) |\n|---|---|---|---|")
    print(f"| accuracy, {n} prompts | {kb / n:.3f} ({wilson(kb, n)[0]:.3f}-{wilson(kb, n)[1]:.3f}) | {ka / n:.3f} "
          f"({wilson(ka, n)[0]:.3f}-{wilson(ka, n)[1]:.3f}) | {(ka - kb) / n:+.3f} [{lo:+.3f}, {hi:+.3f}] |")
    print("iteration  reward  KL(ref) per response (k1)  response tokens")
    for h in result.history:
        print(f"{h['iteration']:9d}  {h['reward']:.3f}  {h['kl_ref']:+.4f}  {h['response_tokens']:.1f}")
    kls = [h["kl_ref"] for h in result.history]
    print(f"KL to the reference per response: max {max(kls):.4f}, last {kls[-1]:.4f}")
    print(f"timings (s): {json.dumps({k: round(v) for k, v in clock.marks.items()})}; end: {load_line()}")
    (out / "result.json").write_text(json.dumps({"args": vars(args), "chosen": chosen, "dev": dev, "dev_sft": dev_sft,
                                                 "before": before, "after": after, "history": result.history,
                                                 "timings": clock.marks}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
