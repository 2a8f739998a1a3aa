"""The AFM report's optimizer (section 3.2.4): RMSProp with momentum on clipped, normalised updates.

Per parameter block θ with gradient g (after the global gradient-norm clip, see `clip.py`), at step t = 1, 2, ...

    v_t = β2 · v_{t-1} + (1 - β2) · (g² + ε)           EMA of squared gradients, ε = 1e-30 added first
    u_t = g / sqrt(v_t / (1 - β2^t))                     instantaneous update, bias-corrected second moment
    u_t = u_t · min(1, 1 / ‖u_t‖)                        clipped to norm 1 per block (per parameter tensor)
    m_t = β1 · m_{t-1} + (1 - β1) · u_t                  smoothed update, no bias correction
    θ_t = θ_{t-1} - s_t · (η · m_t + λ · θ_{t-1})        learning rate, decoupled weight decay, then schedule

β1 = β2 = 0.95. Each group's `lr` already holds s_t·η (set by the schedule, μParam multiplier included) and
`schedule` holds s_t, so the decay term is `schedule · weight_decay · θ`: it is not multiplied by η.

With tensor parallelism a block is sharded over ranks; its norm is summed over the tensor-parallel group
(one all-reduce per parameter group), so the clip sees the whole block.

Since every entry of u is about ±1 once v has settled, ‖u‖ ≈ sqrt(numel) and the clip is active for any
block larger than one entry: the per-entry step is about η / sqrt(numel). The peak rate therefore depends
on block sizes; the tiny CPU configs use larger rates than the report's 0.01 for that reason.
"""

from __future__ import annotations

import torch

from .clip import tensor_parallel_sum_


class AFMRMSPropMomentum(torch.optim.Optimizer):
    def __init__(self, params, *, lr: float, betas: tuple[float, float] = (0.95, 0.95), eps: float = 1e-30,
                 weight_decay: float = 0.0, update_clip: float = 1.0):
        if lr < 0 or not 0 <= betas[0] < 1 or not 0 <= betas[1] < 1 or eps < 0 or update_clip <= 0:
            raise ValueError(f"AFMRMSPropMomentum: bad hyper-parameters lr={lr} betas={betas} eps={eps} "
                             f"update_clip={update_clip}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, update_clip=update_clip,
                        schedule=1.0)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._step_group(group)
        return loss

    def _step_group(self, group: dict) -> None:
        """All blocks of a group at once with torch's multi-tensor (_foreach) kernels."""
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return
        beta1, beta2 = group["betas"]
        vs, ms, corrections = [], [], []
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["v"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["m"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["step"] += 1
            vs.append(state["v"])
            ms.append(state["m"])
            corrections.append((1 - beta2 ** state["step"]) ** 0.5)
        grads = [p.grad for p in params]
        # v_t = β2 v + (1 - β2)(g² + ε)
        torch._foreach_mul_(vs, beta2)
        torch._foreach_addcmul_(vs, grads, grads, value=1 - beta2)
        torch._foreach_add_(vs, (1 - beta2) * group["eps"])
        # u = g / sqrt(v / (1 - β2^t)) = c · g / sqrt(v) with c = sqrt(1 - β2^t)
        raw = torch._foreach_div(grads, torch._foreach_sqrt(vs))
        # clip each block's update to norm `update_clip` (norms summed over tensor-parallel shards);
        # the bias correction c and the clip factor go in as one per-block scalar
        c = torch.tensor(corrections, dtype=torch.float32, device=raw[0].device)
        sq_norms = torch.stack(torch._foreach_norm(raw)).float().pow(2) * c * c
        sharded = torch.tensor([bool(getattr(p, "tensor_model_parallel", False)) for p in params],
                               device=sq_norms.device)
        tensor_parallel_sum_(sq_norms, sharded)
        factors = c * torch.clamp(group["update_clip"] / (sq_norms.sqrt() + 1e-12), max=1.0)
        torch._foreach_mul_(raw, list(factors.to(raw[0].dtype).unbind()))
        # m_t = β1 m + (1 - β1) u = lerp(m, u, 1 - β1)
        torch._foreach_lerp_(ms, raw, 1 - beta1)
        # θ_t = θ - s·λ·θ - (s·η)·m   (decay uses θ_{t-1}, so it is applied first)
        if group["weight_decay"]:
            torch._foreach_mul_(params, 1 - group["schedule"] * group["weight_decay"])
        torch._foreach_add_(params, ms, alpha=-group["lr"])
