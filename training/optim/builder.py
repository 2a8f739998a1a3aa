"""Optimizer construction: parameter groups with μParam (simple) learning rates, AFM optimizer or AdamW.

μParam (simple): a linear layer's learning rate is the peak rate times `base_width / fan_in`, so a rate
tuned at `base_width` carries over to wider models; embeddings (tied with the output layer) and norm gains
keep the peak rate. A parameter may carry its own `lr_mult` attribute (a recipe's new head, e.g. the reward
model's `rm.head_lr_mult`), which multiplies its rate on top. Weight decay applies to matrices only, not to
norm gains (the report does not say; this is the common choice).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from manifests.config import require_number
from manifests.errors import ConfigError

from .afm_rmsprop import AFMRMSPropMomentum
from .schedule import WarmupCosine


@dataclass(frozen=True, kw_only=True)
class OptimConfig:
    name: str = "afm_rmsprop"  # or "adamw" (the baseline)
    peak_lr: float = 0.01
    weight_decay: float = 3.16e-4
    warmup_steps: int = 5000
    final_fraction: float = 0.005
    beta1: float = 0.95
    beta2: float = 0.95
    eps: float = 1e-30
    grad_clip: float = 1.0  # global gradient norm, applied first
    drop_norm: float | None = 100.0  # skip the whole step when the global gradient norm is >= this (AXLearn)
    update_clip: float = 1.0  # per-block update RMS (AFM optimizer only; AXLearn's raw_update_clipping_threshold)
    mup_base_width: int | None = None  # None: no μParam scaling
    # stop the run (nothing saved) after this many skipped steps in a row; 0: never stop. A run whose every
    # step is skipped stops too: its model did not train (NaN weights or data, a rate far too high)
    max_skipped_in_row: int = 20

    def __post_init__(self):
        if self.name not in ("afm_rmsprop", "adamw"):
            raise ConfigError(f"optim.name must be 'afm_rmsprop' or 'adamw'; got {self.name!r}")
        for key, low in (("peak_lr", "gt"), ("weight_decay", "ge"), ("final_fraction", "ge"), ("eps", "gt"),
                         ("update_clip", "gt")):
            require_number(getattr(self, key), f"optim.{key}", **{low: 0})
        require_number(self.final_fraction, "optim.final_fraction", le=1)
        for key in ("beta1", "beta2"):
            require_number(getattr(self, key), f"optim.{key}", ge=0, lt=1)
        require_number(self.warmup_steps, "optim.warmup_steps", ge=0, integer=True)
        require_number(self.max_skipped_in_row, "optim.max_skipped_in_row", ge=0, integer=True)
        if not self.grad_clip > 0 or (self.drop_norm is not None and not self.drop_norm > 0):
            raise ConfigError(f"optim.grad_clip ({self.grad_clip}) and optim.drop_norm ({self.drop_norm}) must be "
                              "> 0 (drop_norm may be null: never skip a step)")
        if self.mup_base_width is not None and self.mup_base_width <= 0:
            raise ConfigError(f"optim.mup_base_width must be > 0 or null; got {self.mup_base_width}")

    def schedule(self, total_steps: int) -> WarmupCosine:
        return WarmupCosine(warmup_steps=min(self.warmup_steps, total_steps), total_steps=total_steps,
                            final_fraction=self.final_fraction)


def fan_in(param: torch.nn.Parameter) -> int:
    """Input width of a linear weight [out, in], undoing a row-parallel split of the input dimension."""
    n = param.shape[1]
    if getattr(param, "tensor_model_parallel", False) and getattr(param, "partition_dim", 0) == 1:
        from megatron.core import parallel_state

        n *= parallel_state.get_tensor_model_parallel_world_size()
    return n


def param_groups(model: torch.nn.Module, cfg: OptimConfig) -> list[dict]:
    """One group per (lr multiplier, decay) pair; each group remembers `base_lr` for the schedule."""
    groups: dict[tuple[float, bool], list] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        is_matrix = p.ndim == 2
        is_embedding = "word_embeddings" in name or "output_layer" in name
        mult = 1.0
        if cfg.mup_base_width and is_matrix and not is_embedding:
            mult = cfg.mup_base_width / fan_in(p)
        mult *= float(getattr(p, "lr_mult", 1.0))
        groups.setdefault((mult, is_matrix), []).append(p)
    out = []
    for (mult, decay), params in sorted(groups.items()):
        lr = cfg.peak_lr * mult
        out.append({"params": params, "lr": lr, "base_lr": lr, "lr_mult": mult,
                    "weight_decay": cfg.weight_decay if decay else 0.0, "schedule": 1.0})
    return out


def build_optimizer(model: torch.nn.Module, cfg: OptimConfig) -> torch.optim.Optimizer:
    groups = param_groups(model, cfg)
    if cfg.name == "afm_rmsprop":
        return AFMRMSPropMomentum(groups, lr=cfg.peak_lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps,
                                  update_clip=cfg.update_clip)
    # AdamW multiplies the decay by the scheduled lr (torch's convention); eps 1e-8, as usual for Adam
    return torch.optim.AdamW(groups, lr=cfg.peak_lr, betas=(cfg.beta1, cfg.beta2), eps=1e-8)
