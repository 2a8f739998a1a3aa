"""Held-out loss against bits per weight: our palettizer beside coremltools' PostTrainingPalettizer.

    PYTHONPATH=. .venv/bin/python benchmarks/quantize_palettize.py [--steps 300] [--group-size 16]

The model: the tiny AFM-architecture model trained here on the byte-level tiny-core mixture of the bundled
C4 sample (`train tiny-mixtures`). Held-out data: 64 samples of the mixture's held-out documents. Both
palettizers quantize the same linear weights with one LUT per `group_size` output channels:
    ours         training.quantize.palettize on the megatron model (k-means++ seeding, Lloyd, fp16 LUTs)
    coremltools  PostTrainingPalettizer (granularity per_grouped_channel, same group size) on the HF export
                 of the same checkpoint (Qwen3 layout: linear_qkv is q/k/v_proj, linear_fc1 gate/up_proj; with
                 head dim 16 = group size 16, both see exactly the same row groups)
Rows: 16 = float weights; 4 and 2 = every linear layer at that many bits; 3.6 and 3.0 = our greedy mixed
allocation (measured sensitivity on training-split calibration batches), and coremltools run with the SAME
per-layer bits (module_name_configs). Last column: ours with k-means weighted by the calibration batches'
mean squared input per column (`--weighting activations`), same bits; and ours with k-means weighted by each
weight's mean squared per-sample gradient on the same calibration samples (`--weighting gradients`, a diagonal
Fisher), same bits. The embedding is int8 per row (ours) in every quantized row, for both
(coremltools' palettizer is given only the linear layers). bpw is over the linear weights, fp16 LUTs counted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _hf_names(name: str) -> list[str]:
    i = name.split(".")[2]
    kind = name.split(".")[-2]
    base = f"model.layers.{i}."
    return {"linear_qkv": [base + f"self_attn.{p}_proj" for p in "qkv"],
            "linear_proj": [base + "self_attn.o_proj"],
            "linear_fc1": [base + "mlp.gate_proj", base + "mlp.up_proj"],
            "linear_fc2": [base + "mlp.down_proj"]}[kind]


@torch.no_grad()
def hf_loss(model, batches) -> float:
    total = count = 0.0
    for b in batches:
        logits = model(b["tokens"]).logits.float()
        ce = torch.nn.functional.cross_entropy(logits.flatten(0, 1), b["labels"].flatten(), reduction="none")
        total += float((ce.view_as(b["labels"]) * b["loss_mask"]).sum())
        count += float(b["loss_mask"].sum())
    return total / count


def tiny_checkpoint(steps: int) -> tuple[Path, Path]:
    """Train the tiny model on the byte-level tiny-core mixture (bundled C4) in a temp dir."""
    from training.byte_mixture import bundled_c4_texts, publish_tiny_mixtures
    from training.config import from_dict
    from training.trainer import train

    work = Path(tempfile.mkdtemp(prefix="bench-palettize-"))
    publish_tiny_mixtures(work / "root", bundled_c4_texts(REPO))
    cfg = from_dict({
        "name": "bench-pal", "stage": "core", "model": {"shape": "tiny", "vocab_size": 256},
        "data": {"mixture": "tiny-core", "root": str(work / "root"), "valid_samples": 32},
        "optim": {"name": "afm_rmsprop", "peak_lr": 0.03, "warmup_steps": 5, "final_fraction": 0.005,
                  "mup_base_width": 64},
        "global_batch": 16, "micro_batch": 16, "steps": steps, "seed": 7, "out_dir": str(work / "run"),
        "log_every": 0})
    checkpoint = train(cfg, log=lambda *a, **k: None).checkpoint
    return work, checkpoint


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--group-size", type=int, default=16)
    args = ap.parse_args()

    from training import checkpoint as ckpt
    from training import parallel
    from training.export_hf import export_hf
    from training.quantize.evalset import eval_set, mean_loss
    from training.quantize.palettize import (EMBEDDING, allocate_bits, gradient_fisher, input_energy, int8_rows,
                                             is_palettized, layer_bpw, palettize_state, sensitivities)
    from training.trainer import load_model

    work, checkpoint = tiny_checkpoint(args.steps)
    info = ckpt.open_checkpoint(checkpoint)
    data = eval_set(info, cache_dir=work / "cache", calib_samples=16, valid_samples=64)
    parallel.setup(parallel.ParallelConfig())
    model, _ = load_model(checkpoint, seq_length=data.seq_length)
    state = {k: v.detach().clone() for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)}
    names = [k for k, v in state.items() if is_palettized(k, v)]
    gs = args.group_size
    sizes = {k: tuple(state[k].shape) for k in names}
    _, sens = sensitivities(model, state, names, data.calib, bits=2, group_size=gs, seed=0)
    energy = input_energy(model, names, data.calib)  # for the activation-weighted k-means column
    fisher = gradient_fisher(model, names, data.calib)  # for the gradient-weighted k-means column

    plans = {"16": None, "4": {k: 4 for k in names}}
    for target in (3.6, 3.0):
        plans[f"{target}"] = allocate_bits(sizes, sens, target=target, bits=(4, 2), group_size=gs)
    plans["2"] = {k: 2 for k in names}

    import logging

    import coremltools
    import transformers
    from coremltools.optimize.torch.palettization import (ModulePostTrainingPalettizerConfig,
                                                          PostTrainingPalettizer, PostTrainingPalettizerConfig)

    logging.getLogger("coremltools").setLevel(logging.WARNING)  # per-block progress lines otherwise
    hf_dir = export_hf(checkpoint, work / "hf", tokenizer=False)
    hf_float = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
    n_total = sum(state[k].numel() for k in names)
    print(f"tiny model: {sum(v.numel() for v in state.values()):,} parameters, {n_total:,} in {len(names)} "
          f"palettized linear layers; group size {gs}; held-out {sum(len(b['tokens']) for b in data.valid)} "
          f"samples x {data.seq_length} tokens; coremltools {coremltools.__version__}")
    print(f"{'target':>6} {'bpw':>6} {'2-bit layers':>12} {'ours loss':>10} {'coremltools':>11} "
          f"{'ours-float':>10} {'cml-float':>10} {'ours s':>7} {'cml s':>7} {'ours act-w':>10} {'ours grad-w':>11}")
    base = None
    for label, plan in plans.items():
        if plan is None:
            ours = mean_loss(model, data.valid)
            theirs = hf_loss(hf_float, data.valid)
            base = ours
            print(f"{label:>6} {32.0:6.3f} {'-':>12} {ours:10.4f} {theirs:11.4f} {0:10.4f} {theirs - base:10.4f}")
            continue
        t0 = time.perf_counter()
        q = palettize_state(state, plan, group_size=gs)
        t_ours = time.perf_counter() - t0
        ckpt.load_state_dict_(model, q.state)
        ours = mean_loss(model, data.valid)
        ckpt.load_state_dict_(model, palettize_state(state, plan, group_size=gs, col_weights=energy).state)
        weighted = mean_loss(model, data.valid)
        ckpt.load_state_dict_(model, palettize_state(state, plan, group_size=gs, col_weights=fisher).state)
        grad_weighted = mean_loss(model, data.valid)
        ckpt.load_state_dict_(model, state)
        bpw = sum(layer_bpw(sizes[k], plan[k], gs) * state[k].numel() for k in names) / n_total

        hf = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
        module_cfg = {m: ModulePostTrainingPalettizerConfig(n_bits=plan[k], granularity="per_grouped_channel",
                                                            group_size=gs)
                      for k in names for m in _hf_names(k)}
        t0 = time.perf_counter()
        hf = PostTrainingPalettizer(hf, PostTrainingPalettizerConfig(module_name_configs=module_cfg)).compress()
        t_cml = time.perf_counter() - t0
        with torch.no_grad():  # the same int8 embedding as ours (tied: the output layer too)
            qe, scale = int8_rows(state[EMBEDDING])
            hf.model.embed_tokens.weight.copy_(qe.float() * scale[:, None])
        theirs = hf_loss(hf, data.valid)
        low = sum(b == 2 for b in plan.values())
        print(f"{label:>6} {bpw:6.3f} {low:>5}/{len(names):<6} {ours:10.4f} {theirs:11.4f} {ours - base:10.4f} "
              f"{theirs - base:10.4f} {t_ours:7.2f} {t_cml:7.2f} {weighted:10.4f} {grad_weighted:11.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
