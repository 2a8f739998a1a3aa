"""The GPU path of the trainer: megatron's native bf16, its DDP with a contiguous fp32 gradient buffer, and
its DistributedOptimizer (ZeRO-1: optimizer state and fp32 main weights sharded over data parallelism)
around the AFM optimizer, with AXLearn's skip-and-clip in front.

UNEXECUTED: no GPU is lent to this project's machines. Written against megatron-core 0.16.1's source
(`optimizer/distrib_optimizer.py`, `optimizer/optimizer.py`, `distributed/distributed_data_parallel.py`,
`transformer/module.py`); the CPU path (training/trainer.py without this module) is what the tests run.

How the pieces fit:
- `Float16Module` casts the GPTModel's parameters to bf16 in place (same Parameter objects) and returns
  fp32 logits; with `precision: fp32` the model is used as is.
- megatron's `DistributedDataParallel` accumulates gradients into `param.main_grad` (fp32 buffer,
  `grad_reduce_in_fp32`), reduce-scatters them (distributed optimizer) or all-reduces them in
  `finish_grad_sync()`.
- The optimizer wrapper is megatron's `DistributedOptimizer` (or `Float16OptimizerWithFloat16Params` /
  `FP32Optimizer` without sharding), built the way `get_megatron_optimizer` builds it, except that the
  inner optimizer comes from our parameter groups (μParam rates, decay only on matrices) and is then
  swapped for `AFMRMSPropMomentum`: megatron asserts an Adam inner optimizer at construction time (for
  its own checkpoint format, which we do not use: `state_dict` below saves each rank's shard).
- With the distributed optimizer a parameter block is split across data-parallel ranks, so the AFM
  per-block RMS clip sums each block's squares over the data-parallel group (`_DPBlockReduce`).
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from .optim import AFMRMSPropMomentum, OptimConfig, param_groups
from .optim.clip import tensor_parallel_sum_


class _DPBlockReduce:
    """Whole-block (sum of u², element count) for slices of blocks held by data-parallel ranks."""

    def __init__(self, model_params: list, shard_to_model: dict[int, torch.nn.Parameter], dp_group):
        from megatron.core import parallel_state

        tp = parallel_state.get_tensor_model_parallel_world_size()
        self.index = {id(p): i for i, p in enumerate(model_params)}
        self.shard_to_model = shard_to_model
        self.group = dp_group
        dev = model_params[0].device
        self.sharded = torch.tensor([bool(getattr(p, "tensor_model_parallel", False)) for p in model_params],
                                    device=dev)
        self.numel = torch.tensor([p.numel() * (tp if getattr(p, "tensor_model_parallel", False) else 1)
                                   for p in model_params], dtype=torch.float32, device=dev)

    def __call__(self, shards: list, sums: torch.Tensor):
        vec = torch.zeros(len(self.index), dtype=torch.float32, device=self.numel.device)
        idx = None
        if shards:
            idx = torch.tensor([self.index[id(self.shard_to_model[id(s)])] for s in shards], device=vec.device)
            vec.index_add_(0, idx, sums.float())
        dist.all_reduce(vec, group=self.group)  # the slices of one block, over data-parallel ranks
        tensor_parallel_sum_(vec, self.sharded)  # then over tensor-parallel ranks
        if idx is None:
            return None
        return torch.stack([vec[idx], self.numel[idx]])


class MegatronAFM:
    """What the trainer needs of an optimizer (param_groups, zero_grad, state_dict, load_state_dict) plus
    `step_or_skip`, over megatron's optimizer wrapper."""

    def __init__(self, ddp_model, megatron_optimizer, inner: AFMRMSPropMomentum):
        self.ddp_model = ddp_model
        self.megatron = megatron_optimizer
        self.inner = inner

    @property
    def param_groups(self):
        return self.inner.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.ddp_model.zero_grad_buffer()
        self.megatron.zero_grad(set_to_none=set_to_none)

    def step_or_skip(self, optim_cfg: OptimConfig) -> tuple[float, bool]:
        """Reduce gradients, then AXLearn's rule: drop the step when the global norm is not finite or is
        >= drop_norm, else clip it to grad_clip and step (megatron then copies the fp32 main weights back
        to the bf16 model weights and all-gathers the shards)."""
        self.ddp_model.finish_grad_sync()
        self.megatron.prepare_grads()  # main_grad -> the main (fp32, possibly sharded) params' .grad
        norm = float(self.megatron.get_grad_norm())  # over data/tensor-parallel ranks, shards counted once
        if not math.isfinite(norm) or (optim_cfg.drop_norm is not None and norm >= optim_cfg.drop_norm):
            return norm, False
        self.megatron.clip_grad_norm(optim_cfg.grad_clip)
        self.megatron.step_with_ready_grads()
        return norm, True

    def state_dict(self) -> dict:
        """This rank's optimizer state and its fp32 main-weight shards (resume needs the same layout)."""
        mains = [p.detach().clone() for g in self.inner.param_groups for p in g["params"]]
        return {"inner": self.inner.state_dict(), "main_params": mains}

    def load_state_dict(self, state: dict) -> None:
        self.inner.load_state_dict(state["inner"])
        mains = [p for g in self.inner.param_groups for p in g["params"]]
        if len(mains) != len(state["main_params"]):
            raise ValueError("optimizer checkpoint from another parallel layout")
        with torch.no_grad():
            for p, saved in zip(mains, state["main_params"]):
                p.copy_(saved)
            if hasattr(self.megatron, "_copy_main_params_to_model_params"):  # not FP32Optimizer: same tensors
                self.megatron._copy_main_params_to_model_params()
            for chunk in getattr(self.megatron, "model_chunks", []):  # distributed: all-gather the shards
                chunk.start_param_sync(force_sync=True)


def wrap_for_gpu(model, cfg) -> tuple[torch.nn.Module, MegatronAFM]:
    """(model to call in the training loop, optimizer) for a TrainConfig on CUDA."""
    from megatron.core import parallel_state
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer
    from megatron.core.optimizer.optimizer import Float16OptimizerWithFloat16Params, FP32Optimizer
    from megatron.core.transformer.module import Float16Module

    bf16 = cfg.parallel.precision == "bf16"
    sharded = cfg.parallel.distributed_optimizer
    config = model.config
    module = Float16Module(config, model) if bf16 else model
    ddp = DistributedDataParallel(config=config, module=module, ddp_config=DistributedDataParallelConfig(
        grad_reduce_in_fp32=True, overlap_grad_reduce=False, use_distributed_optimizer=sharded))
    groups = param_groups(model, cfg.optim)  # the same Parameter objects, now bf16
    placeholder = torch.optim.AdamW(groups, lr=cfg.optim.peak_lr)  # megatron asserts Adam at construction
    opt_config = OptimizerConfig(optimizer="adam", lr=cfg.optim.peak_lr, weight_decay=cfg.optim.weight_decay,
                                 bf16=bf16, params_dtype=torch.bfloat16 if bf16 else torch.float32,
                                 use_distributed_optimizer=sharded, clip_grad=cfg.optim.grad_clip)
    if sharded:
        dp_group = parallel_state.get_data_parallel_group(with_context_parallel=True)
        megatron_opt = DistributedOptimizer(
            placeholder, opt_config, None, None, model_chunks=[ddp], per_model_buffers={0: ddp.buffers},
            data_parallel_group=dp_group,
            data_parallel_group_gloo=parallel_state.get_data_parallel_group_gloo(with_context_parallel=True),
            data_parallel_group_idx=parallel_state.get_model_parallel_group().rank(),
            distributed_optimizer_instance_id=0)
    elif bf16:
        megatron_opt = Float16OptimizerWithFloat16Params(placeholder, opt_config, None, None)
    else:
        megatron_opt = FP32Optimizer(placeholder, opt_config, None)
    # the placeholder's groups now hold the main (fp32, possibly sharded) params; the AFM optimizer takes
    # the same group dicts (base_lr, lr_mult, weight_decay, schedule kept)
    inner = AFMRMSPropMomentum(placeholder.param_groups, lr=cfg.optim.peak_lr,
                               betas=(cfg.optim.beta1, cfg.optim.beta2), eps=cfg.optim.eps,
                               update_clip=cfg.optim.update_clip)
    for group in inner.param_groups:  # the placeholder filled in AdamW's defaults; these are the AFM's
        group.update(betas=(cfg.optim.beta1, cfg.optim.beta2), eps=cfg.optim.eps, update_clip=cfg.optim.update_clip)
    if cfg.optim.name != "afm_rmsprop":
        inner = placeholder  # the AdamW baseline keeps megatron's own inner optimizer
        for group in inner.param_groups:
            group.update(betas=(cfg.optim.beta1, cfg.optim.beta2), eps=1e-8)
    megatron_opt.optimizer = inner
    if sharded and isinstance(inner, AFMRMSPropMomentum):
        shard_to_model = {}
        for model_group, shard_group in zip(megatron_opt.model_float16_groups + megatron_opt.model_fp32_groups,
                                            megatron_opt.shard_fp32_from_float16_groups
                                            + megatron_opt.shard_fp32_groups):
            for mp, sp in zip(model_group, shard_group):
                shard_to_model[id(sp)] = mp
        inner.block_reduce = _DPBlockReduce([p for p in model.parameters() if p.requires_grad], shard_to_model,
                                            dp_group)
    return ddp, MegatronAFM(ddp, megatron_opt, inner)
