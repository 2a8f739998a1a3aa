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
(one all-reduce per step for all blocks), so the clip sees the whole block.
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
        # pass 1: instantaneous updates u_t for every block, and their squared norms
        blocks = []  # (group, param, state, u)
        for group in self.param_groups:
            beta2, eps = group["betas"][1], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.float()
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["v"] = torch.zeros_like(p, dtype=torch.float32)
                    state["m"] = torch.zeros_like(p, dtype=torch.float32)
                state["step"] += 1
                state["v"].mul_(beta2).add_(g * g + eps, alpha=1 - beta2)
                v_hat = state["v"] / (1 - beta2 ** state["step"])
                blocks.append((group, p, state, g / v_hat.sqrt()))
        if not blocks:
            return loss
        sq_norms = torch.stack([u.pow(2).sum() for *_, u in blocks])
        sharded = torch.tensor([bool(getattr(p, "tensor_model_parallel", False)) for _, p, _, _ in blocks],
                               device=sq_norms.device)
        tensor_parallel_sum_(sq_norms, sharded)
        norms = sq_norms.sqrt()
        # pass 2: clip, smooth, apply
        for (group, p, state, u), norm in zip(blocks, norms):
            u.mul_(torch.clamp(group["update_clip"] / (norm + 1e-12), max=1.0))
            beta1 = group["betas"][0]
            state["m"].mul_(beta1).add_(u, alpha=1 - beta1)
            delta = state["m"] * group["lr"]
            if group["weight_decay"]:
                delta.add_(p.float(), alpha=group["schedule"] * group["weight_decay"])
            p.sub_(delta.to(p.dtype))
        return loss
