"""Optimizers (AFM RMSProp-with-momentum, AdamW baseline), μParam learning rates, schedules, clipping."""

from .afm_rmsprop import AFMRMSPropMomentum
from .builder import OptimConfig, build_optimizer, param_groups
from .clip import clip_grad_norm_, skip_or_clip_grad_norm_
from .schedule import WarmupCosine

__all__ = ["AFMRMSPropMomentum", "OptimConfig", "WarmupCosine", "build_optimizer", "clip_grad_norm_",
           "param_groups", "skip_or_clip_grad_norm_"]
