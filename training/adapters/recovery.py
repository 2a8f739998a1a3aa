"""Accuracy-recovery LoRA (AFM report 5.2): train an adapter on the frozen palettized base with the
pretraining mixture's next-token loss, and measure the share of the quantization loss gap it closes:

    recovered = (loss(quantized) - loss(quantized + adapter)) / (loss(quantized) - loss(float))

on the held-out split. The loss pieces are the trainer's (`training.losses`); the optimizer is AdamW over the
adapter's parameters only, with the trainer's gradient-norm clip (`skip_or_clip_grad_norm_`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from manifests.config import require_number

from .. import parallel
from ..data import batch_at, blend_from_pairs, build_splits, valid_fraction
from ..losses import cross_entropies, masked_mean
from ..optim import skip_or_clip_grad_norm_
from .lora import Adapter, AdapterHost, LoraConfig, copy_adapter, new_adapter


@dataclass(frozen=True, kw_only=True)
class RecoveryConfig:
    lora: LoraConfig = LoraConfig()
    steps: int = 40
    batch: int = 16
    lr: float = 3e-3
    grad_clip: float = 1.0
    seed: int = 0

    def __post_init__(self):
        require_number(self.steps, "--steps", where="quantize recover", ge=1, integer=True)
        require_number(self.batch, "--batch", where="quantize recover", ge=1, integer=True)
        require_number(self.lr, "--lr", where="quantize recover", gt=0)
        require_number(self.grad_clip, "grad_clip", where="quantize recover", gt=0)


def train_batches(manifest: dict, *, n: int, batch: int, cache_dir: str | Path) -> list[dict]:
    """`n` training-split samples of the blend a checkpoint (or palettized model) manifest names."""
    data = manifest["data"]
    raw = data["blend"]
    blend = blend_from_pairs(list(zip(raw[0::2], raw[1::2])), vocab_size=int(data["vocab_size"]),
                             eod_id=int(data["eod_id"]), source_id=data["source_id"])
    dcfg = manifest.get("config", {}).get("data", {})
    share = valid_fraction(blend, fraction=dcfg.get("valid_fraction"), documents=dcfg.get("valid_documents"),
                           tokens=dcfg.get("valid_tokens"))
    splits = build_splits(blend, seq_length=int(data["seq_length"]), seed=int(data["seed"]), n_train=n,
                          n_valid=8, cache_dir=cache_dir, valid_share=share)
    return [batch_at(splits.train, s, batch) for s in range(0, n, batch)]


def train_recovery(model, batches: list[dict], cfg: RecoveryConfig, *, residual: dict | None = None,
                   init_from: Adapter | None = None, loss_fn=None, log=print):
    """Train an adapter on `model` (frozen: its parameters get no gradient) over `batches` (cycled for
    cfg.steps). `init_from`: start from a copy of that adapter (a feature adapter initialised from the
    recovery adapter; the original is not changed) instead of a new one. `loss_fn(logits, batch)`: the
    objective (default: next-token cross-entropy over the loss mask). Returns (adapter, host, per-step
    losses); the adapter is left attached through the returned host."""
    for p in model.parameters():
        p.requires_grad_(False)
    adapter = copy_adapter(init_from) if init_from is not None else \
        new_adapter(model, cfg.lora, seed=cfg.seed, residual=residual)
    host = AdapterHost(model)
    host.attach(adapter)
    params = adapter.parameters()
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    dev = parallel.device()
    losses = []
    model.train()
    for step in range(cfg.steps):
        b = batches[step % len(batches)]
        lr = cfg.lr * min(1.0, (step + 1) / 5)  # 5 warm-up steps, then constant
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        logits = model(b["tokens"].to(dev), b["position_ids"].to(dev), None)
        if loss_fn is not None:
            loss = loss_fn(logits, {k: v.to(dev) for k, v in b.items()})
        else:
            (ce,) = cross_entropies(logits, [b["labels"].to(dev)])
            loss = masked_mean(ce, b["loss_mask"].to(dev))
        loss.backward()
        _, keep = skip_or_clip_grad_norm_(params, max_norm=cfg.grad_clip, drop_norm=None)
        if keep:
            opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    if log:
        log(f"LoRA rank {adapter.config.rank} init {'adapter' if init_from else adapter.config.init}: train loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    return adapter, host, losses


def recovered_share(*, float_loss: float, quant_loss: float, adapted_loss: float) -> float:
    gap = quant_loss - float_loss
    return (quant_loss - adapted_loss) / gap if gap > 0 else float("nan")
