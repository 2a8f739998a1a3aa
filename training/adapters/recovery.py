"""Accuracy-recovery LoRA (AFM report 5.2): train an adapter on the frozen palettized base with the
pretraining mixture's next-token loss, and measure the share of the quantization loss gap it closes:

    recovered = (loss(quantized) - loss(quantized + adapter)) / (loss(quantized) - loss(float))

on the held-out split. Two objectives (`RecoveryConfig.loss`): "ce", the next-token cross-entropy on the
training text; "kl", distillation from the float model the palettized one came from (the teacher): the mean
per-token KL(teacher || palettized + adapter) on the same windows, optionally mixed with the CE
(`ce_weight`). The KL targets what palettization changed in the model's predictions, not the calibration
text's domain, which CE also learns (the same CE training on the float model lowers its loss too).
The loss pieces are the trainer's (`training.losses`); the optimizer is AdamW over the
adapter's parameters only, with the trainer's gradient-norm clip (`skip_or_clip_grad_norm_`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from manifests.config import require_number
from manifests.errors import ConfigError, ManifestError

from .. import parallel
from ..data import batch_at, blend_from_pairs, build_splits, valid_fraction
from ..losses import cross_entropies, kl_divergences, masked_mean
from ..optim import skip_or_clip_grad_norm_
from .lora import Adapter, AdapterHost, LoraConfig, copy_adapter, new_adapter
from .store import base_id


LOSSES = ("ce", "kl")


@dataclass(frozen=True, kw_only=True)
class RecoveryConfig:
    lora: LoraConfig = LoraConfig()
    steps: int = 40
    batch: int = 16
    lr: float = 3e-3
    grad_clip: float = 1.0
    seed: int = 0
    loss: str = "ce"  # "ce": next-token cross-entropy; "kl": KL(float teacher || student), + ce_weight · CE
    kl_temperature: float = 1.0
    ce_weight: float = 0.0

    def __post_init__(self):
        if self.loss not in LOSSES:
            raise ConfigError(f"--loss must be one of {', '.join(LOSSES)}; got {self.loss!r} in quantize recover")
        require_number(self.kl_temperature, "--kl-temperature", where="quantize recover", gt=0)
        require_number(self.ce_weight, "--ce-weight", where="quantize recover", ge=0, le=1)
        if self.loss == "ce" and (self.kl_temperature != 1.0 or self.ce_weight != 0.0):
            raise ConfigError("--kl-temperature and --ce-weight apply to --loss kl only; got them with --loss ce "
                              "in quantize recover")
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


def check_teacher(palettized: str | Path, manifest: dict, teacher: str | Path | None = None) -> Path:
    """The float checkpoint a "kl" recovery distils from: `teacher`, else the one the palettized manifest names
    (`source_checkpoint`). It must hold the weights the model was palettized from: the hash the manifest
    records (`source_base`); a manifest written before that was recorded accepts its named directory only."""
    named = manifest.get("source_checkpoint")
    if teacher is None and named is None:
        raise ManifestError(f"{palettized}: the manifest names no source checkpoint; pass the float one as --teacher")
    path = Path(teacher if teacher is not None else named)
    try:
        got = base_id(path)
    except ManifestError:
        raise ManifestError(f"{path}: the --loss kl teacher is not a checkpoint (no model.pt)") from None
    want = manifest.get("source_base")
    if want is None:
        if named is None or Path(named).resolve() != path.resolve():
            raise ManifestError(f"{palettized}: palettized from {named} (no weights hash recorded), so only that "
                                f"checkpoint can be its teacher; got {path}")
    elif got.rsplit("#", 1)[-1] != want.rsplit("#", 1)[-1]:
        raise ManifestError(f"{palettized}: palettized from {want}, but the --loss kl teacher {got} holds other "
                            "weights; pass the float checkpoint it was made from")
    return path


def teacher_logits(teacher, batch: dict) -> torch.Tensor:
    """The frozen teacher's logits for a batch (no graph kept)."""
    with torch.no_grad():
        return teacher(batch["tokens"], batch["position_ids"], None)


def kl_loss(teacher, cfg: RecoveryConfig):
    """The distillation objective as a `train_recovery` loss_fn: masked mean of KL(teacher || student) per
    token at cfg.kl_temperature, mixed with the label CE when cfg.ce_weight > 0. The teacher runs forward
    beside the student on each batch (its logits are not stored: [B,S,V] per batch is the size of a
    step's own logits)."""
    w = cfg.ce_weight

    def loss_fn(logits, batch):
        mask = batch["loss_mask"]
        loss = masked_mean(kl_divergences(logits, teacher_logits(teacher, batch), temperature=cfg.kl_temperature),
                           mask)
        if w:
            (ce,) = cross_entropies(logits, [batch["labels"]])
            loss = (1 - w) * loss + w * masked_mean(ce, mask)
        return loss
    return loss_fn


@torch.no_grad()
def mean_kl(model, teacher, batches: list[dict]) -> float:
    """Token-weighted KL(teacher || model) at temperature 1 over `batches` (held-out figure)."""
    model.eval()
    total = count = 0.0
    dev = parallel.device()
    for b in batches:
        b = {k: v.to(dev) for k, v in b.items()}
        kl = kl_divergences(model(b["tokens"], b["position_ids"], None), teacher_logits(teacher, b))
        total += float((kl * b["loss_mask"]).sum())
        count += float(b["loss_mask"].sum())
    return total / max(count, 1.0)


def train_recovery(model, batches: list[dict], cfg: RecoveryConfig, *, residual: dict | None = None,
                   init_from: Adapter | None = None, loss_fn=None, teacher=None, log=print):
    """Train an adapter on `model` (frozen: its parameters get no gradient) over `batches` (cycled for
    cfg.steps). `init_from`: start from a copy of that adapter (a feature adapter initialised from the
    recovery adapter; the original is not changed) instead of a new one. `loss_fn(logits, batch)`: the
    objective (default: cfg.loss; "kl" needs `teacher`, the float model the palettized one came from, in
    eval mode). Returns (adapter, host, per-step
    losses); the adapter is left attached through the returned host."""
    if loss_fn is None and cfg.loss == "kl":
        if teacher is None:
            raise ConfigError("quantize recover: --loss kl needs the float teacher model; none was given")
        teacher.eval()
        loss_fn = kl_loss(teacher, cfg)
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
        log(f"LoRA rank {adapter.config.rank} ({cfg.loss}) init {'adapter' if init_from else adapter.config.init}: train loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    return adapter, host, losses


def recovered_share(*, float_loss: float, quant_loss: float, adapted_loss: float) -> float:
    gap = quant_loss - float_loss
    return (quant_loss - adapted_loss) / gap if gap > 0 else float("nan")
