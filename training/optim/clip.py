"""Global gradient-norm clipping that counts a tensor-parallel shard once and a replicated tensor once."""

from __future__ import annotations

import torch
import torch.distributed as dist


def _tp_group():
    try:
        from megatron.core import parallel_state

        if parallel_state.model_parallel_is_initialized() and \
                parallel_state.get_tensor_model_parallel_world_size() > 1:
            return parallel_state.get_tensor_model_parallel_group()
    except ImportError:
        pass
    return None


def tensor_parallel_sum_(sq_norms: torch.Tensor, sharded: torch.Tensor) -> None:
    """In place: entries of sharded blocks become their sum over the tensor-parallel group."""
    group = _tp_group()
    if group is None or not bool(sharded.any()):
        return
    part = torch.where(sharded, sq_norms, torch.zeros_like(sq_norms))
    dist.all_reduce(part, group=group)
    sq_norms.copy_(torch.where(sharded, part, sq_norms))


def clip_grad_norm_(params, max_norm: float) -> float:
    """Scale all gradients so that their global L2 norm is at most `max_norm`; returns the norm before."""
    params = [p for p in params if p.grad is not None]
    if not params:
        return 0.0
    sq = torch.stack([p.grad.float().pow(2).sum() for p in params])
    sharded = torch.tensor([bool(getattr(p, "tensor_model_parallel", False)) for p in params], device=sq.device)
    group = _tp_group()
    if group is not None:
        shard_total = (sq * sharded).sum()
        dist.all_reduce(shard_total, group=group)
        total = shard_total + (sq * ~sharded).sum()
    else:
        total = sq.sum()
    norm = total.sqrt()
    scale = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    for p in params:
        p.grad.mul_(scale.to(p.grad.dtype))
    return float(norm)
