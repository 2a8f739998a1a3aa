"""The run plan: what a training config leaves to its data (sequence length, steps, data seed), resolved
once from the mixture manifest (or an explicit blend) before any model is built. The trainer, the memory
plan, distillation and pruning all start from it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from manifests.errors import ConfigError

from .config import TrainConfig
from .data import Blend, blend_from_mixture, blend_from_pairs


@dataclass(frozen=True)
class RunPlan:
    blend: Blend
    seq_length: int
    steps: int
    data_seed: int


def plan_run(cfg: TrainConfig) -> RunPlan:
    """Resolve what the config leaves to the mixture manifest (sequence length, steps, data seed)."""
    d = cfg.data
    if d.mixture:
        blend = blend_from_mixture(d.mixture, root=d.root)
    else:
        blend = blend_from_pairs(d.blend, vocab_size=d.vocab_size, eod_id=d.eod_id)
    if blend.vocab_size > cfg.model.vocab_size:
        raise ConfigError(f"{cfg.name}: the data's vocabulary ({blend.vocab_size}) is larger than the model's "
                          f"({cfg.model.vocab_size}); set model.vocab_size")
    seq_length = cfg.seq_length or blend.seq_length
    if blend.seq_length and cfg.seq_length and cfg.seq_length != blend.seq_length:
        raise ConfigError(f"{cfg.name}: seq_length {cfg.seq_length} differs from the mixture's {blend.seq_length}; "
                          "drop it from the run config or rebuild the mixture")
    steps = cfg.steps or math.ceil(blend.num_samples / cfg.global_batch)
    return RunPlan(blend=blend, seq_length=seq_length, steps=steps,
                   data_seed=blend.seed if blend.seed is not None else cfg.seed)
