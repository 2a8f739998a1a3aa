"""The AFM report's optimizer (section 3.2.4) as Apple's AXLearn runs it: `adastar_learner_config`, i.e.
`skip_and_clip_by_global_norm(adastar_optimizer(...), drop_norm=100, max_norm=1)`.

Per parameter block θ with gradient g (after the global-norm skip/clip in `clip.py`), at step t = 1, 2, ...

    v_t = β2 · v_{t-1} + (1 - β2) · (g² + ε²)         EMA of squared gradients; eps_square ε² = 1e-30
    u_t = g / sqrt(v_t / (1 - β2^t))                   raw update (second moment debiased, eps = 0)
    u_t = u_t / max(1, rms(u_t) / c)                   per-block RMS clip, c = raw_update_clipping_threshold = 1
    m_t = β1 · m_{t-1} + (1 - β1) · u_t                update EMA, no debias (update_ema_debias=False)
    θ_t = θ_{t-1} - s_t · (η · m_t + λ · θ_{t-1})      learning rate, decoupled weight decay, then schedule

with rms(u) = sqrt(mean(u²)) over the whole block. β1 = β2 = 0.95. AXLearn has no momentum on the gradient
itself (gradient_ema_decay=None). Each group's `lr` already holds s_t·η (set by the schedule, μParam multiplier
included) and `schedule` holds s_t, so the decay term is `schedule · weight_decay · θ`, not multiplied by η.

With tensor parallelism a block is sharded over ranks; its sum of squares and its element count are summed
over the tensor-parallel group (one all-reduce per parameter group), so the clip sees the whole block.

Since the RMS of u is about 1 once v has settled, the clip bounds each entry's step near η whatever the
block's size (an L2-norm clip would instead give η / sqrt(numel) per entry).
"""

from __future__ import annotations

import torch

from .clip import tensor_parallel_sum_


class AFMRMSPropMomentum(torch.optim.Optimizer):
    """`eps` is AXLearn's eps_square (added to g² before the EMA); `update_clip` is its
    raw_update_clipping_threshold (a bound on each block's update RMS)."""

    def __init__(self, params, *, lr: float, betas: tuple[float, float] = (0.95, 0.95), eps: float = 1e-30,
                 weight_decay: float = 0.0, update_clip: float = 1.0):
        if lr < 0 or not 0 <= betas[0] < 1 or not 0 <= betas[1] < 1 or eps < 0 or update_clip <= 0:
            raise ValueError(f"AFMRMSPropMomentum: bad hyper-parameters lr={lr} betas={betas} eps={eps} "
                             f"update_clip={update_clip}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, update_clip=update_clip,
                        schedule=1.0)
        super().__init__(params, defaults)
        # (shards, per-shard sums of u²) -> [2, shards] whole-block (sum, count), or None: set by the GPU path
        # when megatron's distributed optimizer hands this optimizer slices of blocks (training/gpu_optim.py);
        # it is a collective, so it runs once per group on every rank, even one with no shard in the group
        self.block_reduce = None

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
            if self.block_reduce is not None:
                self.block_reduce([], torch.zeros(0))
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
        # v_t = β2 v + (1 - β2)(g² + ε²)
        torch._foreach_mul_(vs, beta2)
        torch._foreach_addcmul_(vs, grads, grads, value=1 - beta2)
        torch._foreach_add_(vs, (1 - beta2) * group["eps"])
        # u = g / sqrt(v / (1 - β2^t)) = c · g / sqrt(v) with c = sqrt(1 - β2^t)
        raw = torch._foreach_div(grads, torch._foreach_sqrt(vs))
        # rms(u) per block: (sum of squares, element count), both summed over tensor-parallel shards
        dtype = torch.promote_types(raw[0].dtype, torch.float32)  # bf16 blocks get float32 scalars
        c = torch.tensor(corrections, dtype=dtype, device=raw[0].device)
        sums = torch.stack(torch._foreach_norm(raw)).to(dtype).pow(2) * c * c
        counts = torch.tensor([float(p.numel()) for p in params], dtype=dtype, device=sums.device)
        sharded = torch.tensor([bool(getattr(p, "tensor_model_parallel", False)) for p in params],
                               device=sums.device)
        if self.block_reduce is not None:
            totals = self.block_reduce(params, sums).to(dtype)
        else:
            totals = torch.stack([sums, counts])  # [2, blocks]: one all-reduce for both rows
            tensor_parallel_sum_(totals, sharded)
        rms = (totals[0] / totals[1]).sqrt()
        # u / max(1, rms / threshold); the bias correction c goes in with it as one per-block scalar
        factors = c / torch.clamp(rms / group["update_clip"], min=1.0)
        torch._foreach_mul_(raw, list(factors.to(raw[0].dtype).unbind()))
        # m_t = β1 m + (1 - β1) u = lerp(m, u, 1 - β1)
        torch._foreach_lerp_(ms, raw, 1 - beta1)
        # θ_t = θ - s·λ·θ - (s·η)·m   (decay uses θ_{t-1}, so it is applied first)
        if group["weight_decay"]:
            torch._foreach_mul_(params, 1 - group["schedule"] * group["weight_decay"])
        torch._foreach_add_(params, ms, alpha=-group["lr"])
