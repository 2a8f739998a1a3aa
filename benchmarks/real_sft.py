"""SFT on the real base (SmolLM2-135M-Instruct, imported from its GGUF): held-out loss and IFEval checks,
before and after, in the checkpoint's chat format (ChatML for this tokenizer: training.chat.chat_format).

    nice -n 10 .venv/bin/python benchmarks/real_sft.py --work out/realbase [--steps 30 --batch 4 ...]

Data: the shipped LLaMA-Factory KTO demo conversations (data/samples/preference/llamafactory/kto_en_demo,
the 150 with label true), split 80/10/10 (seeded) into train / dev / test. IFEval prompts (../shared/data/
benchmarks, evals/model/ifeval.py) are split 20/80 (seeded) into dev / test. The dev prompts serve only
`--rs-samples N`, rejection sampling as in the AFM recipe's SFT data: N sampled base responses per dev prompt;
the first that ends by itself and passes every strict check joins the training data. The model is trained on
`train` (and those) only; the step kept (among the `--save-every` checkpoints) is the one with the lowest dev
loss; the test conversations and test IFEval prompts are used for nothing but the figures printed.
Only the top `--trainable-layers` of 30 transformer layers (and the final norm) are trained (CPU budget).

IFEval: greedy, at most `--max-new` tokens, strict and loose prompt/instruction-level accuracy of
synth/checkers/ifeval.py, with a paired bootstrap interval on the strict prompt-level change, and the share of
responses that end by themselves (`<|im_end|>`). Until the fifth session the turns were written in the
project's own template, which the base (instruction-tuned in ChatML) never ended by itself.
Writes `<work>/sft/result.json` and `<work>/sft/chosen` (the kept checkpoint, read by real_rm/real_dpo).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from real_common import (Clock, REPO, base_checkpoint, generate, ifeval_prompts, ifeval_scores, load_line,
                         paired_bootstrap, setup_threads, sft_heldout_loss, split, wilson, write_jsonl)

KTO = REPO / "data/samples/preference/llamafactory/kto_en_demo.json.gz"


def rejection_sampled(base, prompts: list[dict], *, k: int, max_new: int, temperature: float) -> list[dict]:
    """One conversation per prompt whose first passing sample (of `k`, sampled from the base) ends by itself and
    passes every strict IFEval check of its prompt (synth/checkers/ifeval.py): rejection-sampled SFT data, from
    the IFEval dev split only (the test prompts are never sampled)."""
    from synth.checkers.ifeval import score

    convs = [[{"role": "user", "content": p["prompt"]}] for p in prompts]
    kept: dict[int, str] = {}
    for j in range(k):
        texts, ended = generate(base, convs, max_new_tokens=max_new, batch=32, temperature=temperature,
                                seed=1000 * (j + 1))
        _, rows = score(prompts, texts)
        for i, (t, e, row) in enumerate(zip(texts, ended, rows)):
            if i not in kept and e and all(row["strict"]):
                kept[i] = t
    return [{"messages": convs[i] + [{"role": "assistant", "content": kept[i]}]} for i in sorted(kept)]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--work", default="out/realbase")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=4, help="packs per step")
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--trainable-layers", type=int, default=10)
    p.add_argument("--save-every", type=int, default=10)
    p.add_argument("--ifeval-test", type=int, default=100)
    p.add_argument("--max-new", type=int, default=128)
    p.add_argument("--rs-samples", type=int, default=0,
                   help="rejection-sampled IFEval data: this many sampled base responses per IFEval dev prompt; "
                        "those that end by themselves and pass every strict check join the SFT training data")
    p.add_argument("--rs-max-new", type=int, default=160, help="new tokens per rejection-sampled response")
    p.add_argument("--rs-temperature", type=float, default=0.7)
    args = p.parse_args()
    setup_threads()

    from training.post_config import from_dict
    from training.post_loop import read_records
    from training.sft import train_sft

    work = Path(args.work)
    clock = Clock()
    print(f"start: {load_line()}", flush=True)
    base = base_checkpoint(work)
    records = [r for r in read_records(KTO) if r.get("label") is not False]
    parts = split(records, {"train": 0.8, "dev": 0.1, "test": 0.1}, seed=0)
    files = {k: write_jsonl(work / "sft" / "data" / f"{k}.jsonl", v) for k, v in parts.items()}
    prompts = split(ifeval_prompts(), {"dev": 0.2, "test": 0.8}, seed=0)
    test_prompts = prompts["test"][: args.ifeval_test]
    tok_spec = str(base / "tokenizer" / "tokenizer.json")

    train_files = [files["train"]]
    if args.rs_samples:
        rs = rejection_sampled(base, prompts["dev"], k=args.rs_samples, max_new=args.rs_max_new,
                               temperature=args.rs_temperature)
        train_files.append(write_jsonl(work / "sft" / "data" / "ifeval_rs.jsonl", rs))
        print(f"rejection sampling: {len(rs)} of {len(prompts['dev'])} IFEval dev prompts got a response that ends "
              f"and passes every strict check ({args.rs_samples} samples each; {clock.mark('rs'):.0f} s)", flush=True)
    before = {"test_loss": sft_heldout_loss(base, files["test"], seq_length=args.seq, tokenizer_spec=tok_spec)}
    print(f"base held-out loss {before['test_loss']:.4f} ({clock.mark('base loss'):.0f} s)", flush=True)
    before["ifeval"] = ifeval_scores(base, test_prompts, max_new_tokens=args.max_new)
    print(f"base IFEval {before['ifeval']['metrics']} ({clock.mark('base ifeval'):.0f} s)", flush=True)

    cfg = from_dict({
        "name": "real-sft", "method": "sft", "model": {"shape": "checkpoint"}, "tokenizer": "checkpoint",
        "init_from": str(base), "template": {"max_length": args.seq},
        "data": {"sources": [{"path": f} for f in train_files], "valid_fraction": 0.05, "seed": 0},
        "seq_length": args.seq, "global_batch": args.batch, "micro_batch": min(2, args.batch),
        "steps": args.steps, "save_every": args.save_every, "trainable_layers": args.trainable_layers,
        "optim": {"name": "adamw", "peak_lr": args.lr, "warmup_steps": 3, "final_fraction": 0.1,
                  "weight_decay": 0.0},
        "out_dir": str(work / "sft" / "run"), "log_every": 5, "seed": 0}, where="real_sft")
    result = train_sft(cfg)
    clock.mark("sft")
    dev = {str(c): sft_heldout_loss(c, files["dev"], seq_length=args.seq, tokenizer_spec=tok_spec)
           for c in sorted(Path(cfg.out_dir).glob("step-*")) if (c / "checkpoint.json").exists()}
    chosen = min(dev, key=dev.get)
    print("dev loss per checkpoint: " + ", ".join(f"{Path(c).name} {v:.4f}" for c, v in dev.items())
          + f" -> {Path(chosen).name}", flush=True)
    after = {"test_loss": sft_heldout_loss(chosen, files["test"], seq_length=args.seq, tokenizer_spec=tok_spec)}
    after["ifeval"] = ifeval_scores(chosen, test_prompts, max_new_tokens=args.max_new)
    clock.mark("after")

    b, a = before["ifeval"], after["ifeval"]
    lo, hi = paired_bootstrap(b["per_prompt"], a["per_prompt"])
    ilo, ihi = paired_bootstrap(b["per_instruction"], a["per_instruction"])
    n = len(test_prompts)
    rs_note = " + rejection-sampled IFEval dev responses" if args.rs_samples else ""
    print(f"\nSFT on {len(parts['train'])} conversations{rs_note} ({args.steps} steps x {args.batch} packs of "
          f"{args.seq}, top {args.trainable_layers} layers, lr {args.lr}); kept {Path(chosen).name} by dev loss; "
          f"SFT {result.seconds:.0f} s")
    print("| metric (held-out) | base | SFT | change (95% CI) |\n|---|---|---|---|")
    print(f"| SFT loss, {len(parts['test'])} test conversations (nats/token) | {before['test_loss']:.4f} | "
          f"{after['test_loss']:.4f} | {after['test_loss'] - before['test_loss']:+.4f} |")
    for key in ("prompt_level_strict", "instruction_level_strict", "prompt_level_loose", "instruction_level_loose"):
        extra = f" [{lo:+.3f}, {hi:+.3f}]" if key == "prompt_level_strict" else \
            f" [{ilo:+.3f}, {ihi:+.3f}]" if key == "instruction_level_strict" else ""
        print(f"| IFEval {key}, {n} test prompts | {b['metrics'][key]:.3f} | {a['metrics'][key]:.3f} | "
              f"{a['metrics'][key] - b['metrics'][key]:+.3f}{extra} |")
    print(f"| responses that end by themselves | {b['ended']:.3f} | {a['ended']:.3f} | {a['ended'] - b['ended']:+.3f} |")
    k = sum(a["per_prompt"])
    print(f"SFT strict prompt-level {k:.0f}/{n}, Wilson 95% {wilson(k, n)}")
    print(f"timings (s): {json.dumps({k: round(v) for k, v in clock.marks.items()})}; end: {load_line()}")
    out = work / "sft"
    (out / "chosen").write_text(str(chosen))
    (out / "result.json").write_text(json.dumps({
        "args": vars(args), "chosen": chosen, "dev_loss": dev, "before": {**before, "ifeval": {
            k: v for k, v in b.items() if k != "rows"}}, "after": {**after, "ifeval": {
                k: v for k, v in a.items() if k != "rows"}}, "timings": clock.marks}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
