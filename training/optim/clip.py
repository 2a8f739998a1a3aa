"""Global gradient-norm clipping that counts a tensor-parallel shard once and a replicated tensor once, and
AXLearn's `skip_and_clip_by_global_norm`: a step whose global gradient norm is not finite or is >= `drop_norm`
is dropped whole (no parameter update, no optimizer-state update, the schedule does not advance); otherwise
the gradients are scaled so that their norm is at most `max_norm`."""

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


def global_grad_norm(params) -> torch.Tensor:
    """The L2 norm of all gradients together (a 0-d float32 tensor), tensor-parallel shards summed."""
    params = [p for p in params if p.grad is not None]
    if not params:
        return torch.zeros(())
    sq = torch.stack([p.grad.float().pow(2).sum() for p in params])
    sharded = torch.tensor([bool(getattr(p, "tensor_model_parallel", False)) for p in params], device=sq.device)
    group = _tp_group()
    if group is not None:
        shard_total = (sq * sharded).sum()
        dist.all_reduce(shard_total, group=group)
        total = shard_total + (sq * ~sharded).sum()
    else:
        total = sq.sum()
    return total.sqrt()


def clip_grad_norm_(params, max_norm: float) -> float:
    """Scale all gradients so that their global L2 norm is at most `max_norm`; returns the norm before."""
    params = [p for p in params if p.grad is not None]
    norm = global_grad_norm(params)
    scale = torch.clamp(max_norm / (norm + 1e-8), max=1.0)  # AXLearn's eps
    for p in params:
        p.grad.mul_(scale.to(p.grad.dtype))
    return float(norm)


def skip_or_clip_grad_norm_(params, *, max_norm: float, drop_norm: float | None) -> tuple[float, bool]:
    """(norm before clipping, keep): keep is False when the step must be dropped (norm not finite or
    >= drop_norm); the gradients are then left as they are and the caller must not step the optimizer.
    Every rank computes the same norm (gradients are data-parallel reduced, tensor-parallel summed), so
    every rank takes the same decision."""
    params = [p for p in params if p.grad is not None]
    norm = float(global_grad_norm(params))
    if not torch.isfinite(torch.tensor(norm)) or (drop_norm is not None and norm >= drop_norm):
        return norm, False
    scale = min(1.0, max_norm / (norm + 1e-8))
    if scale < 1.0:
        for p in params:
            p.grad.mul_(scale)
    return norm, True
