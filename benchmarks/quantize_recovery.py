"""Accuracy-recovery LoRA: the share of the palettization loss gap closed, per rank and initialisation.

    PYTHONPATH=. .venv/bin/python benchmarks/quantize_recovery.py [--steps 300] [--lora-steps 60]

The tiny model of benchmarks/quantize_palettize.py (same training), palettized (a) with our greedy mixed
allocation at 3.6 bpw and (b) at 2 bits everywhere. For each, LoRA adapters of rank 8/16/32 on every linear
layer, initialised zero (B = 0) or from the SVD of W - W_hat, are trained for --lora-steps steps on the
training split of the pretraining mixture; held-out loss on 64 held-out samples.
    recovered = (loss_quant - loss_quant+lora) / (loss_quant - loss_float)
Control row: the same rank-16 adapter training on the FLOAT model, to show how much of the gain is
continued training rather than recovery (the tiny model is not trained to convergence).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lora-steps", type=int, default=60)
    args = ap.parse_args()

    from quantize_palettize import tiny_checkpoint

    from training import checkpoint as ckpt
    from training import parallel
    from training.adapters.lora import LoraConfig
    from training.adapters.recovery import RecoveryConfig, recovered_share, train_batches, train_recovery
    from training.quantize.evalset import eval_set, mean_loss
    from training.quantize.palettize import allocate_bits, is_palettized, palettize_state, sensitivities
    from training.trainer import load_model

    work, checkpoint = tiny_checkpoint(args.steps)
    info = ckpt.open_checkpoint(checkpoint)
    data = eval_set(info, cache_dir=work / "cache", calib_samples=16, valid_samples=64)
    batches = train_batches(info.manifest, n=16 * args.lora_steps, batch=16, cache_dir=work / "cache2")
    parallel.setup(parallel.ParallelConfig())
    model, _ = load_model(checkpoint, seq_length=data.seq_length)
    state = {k: v.detach().clone() for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)}
    names = [k for k, v in state.items() if is_palettized(k, v)]
    float_loss = mean_loss(model, data.valid)
    _, sens = sensitivities(model, state, names, data.calib, bits=2, group_size=16, seed=0)
    plans = {"3.6 mixed": allocate_bits({k: tuple(state[k].shape) for k in names}, sens, target=3.6,
                                        bits=(4, 2), group_size=16),
             "2-bit": {k: 2 for k in names}}
    print(f"float held-out loss {float_loss:.4f}; LoRA on all 8 linear layers, {args.lora_steps} steps, batch 16, "
          f"AdamW lr 3e-3")
    print(f"{'base':>10} {'quant loss':>10} {'rank':>4} {'init':>5} {'adapted':>8} {'recovered':>9} {'s':>5}")
    for label, plan in plans.items():
        q = palettize_state(state, plan, group_size=16)
        residual = {k: state[k] - q.state[k] for k in names}
        ckpt.load_state_dict_(model, q.state)
        quant = mean_loss(model, data.valid)
        for init in ("zero", "svd"):
            for rank in (8, 16, 32):
                t0 = time.perf_counter()
                cfg = RecoveryConfig(lora=LoraConfig(rank=rank, init=init), steps=args.lora_steps)
                _, host, _ = train_recovery(model, batches, cfg, residual=residual, log=None)
                adapted = mean_loss(model, data.valid)
                host.detach()
                share = recovered_share(float_loss=float_loss, quant_loss=quant, adapted_loss=adapted)
                print(f"{label:>10} {quant:10.4f} {rank:4d} {init:>5} {adapted:8.4f} {share:9.1%} "
                      f"{time.perf_counter() - t0:5.1f}")
    ckpt.load_state_dict_(model, state)
    _, host, _ = train_recovery(model, batches, RecoveryConfig(lora=LoraConfig(rank=16), steps=args.lora_steps),
                                log=None)
    control = mean_loss(model, data.valid)
    host.detach()
    print(f"control: float model + rank-16 LoRA, same training: {float_loss:.4f} -> {control:.4f} "
          f"({float_loss - control:+.4f}, i.e. continued training alone)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
