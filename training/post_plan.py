"""`cidermill train plan` for post-training configs (sft | rm | dpo): per-GPU memory and a throughput
projection, from the pretraining plan's arithmetic (training/memory.py) with what differs per recipe:

- rows per item: SFT trains one packed sequence per item; RM and DPO put the chosen and the rejected response
  of a pair in two rows, so a micro-batch of b pairs holds 2b sequences. DPO's reference log-probs are
  cached before training (training/dpo.py), so no reference model is in memory; the one-time reference pass
  is projected separately.
- the attention mask: the local kernels take an explicit [b, 1, s, s] bool mask (block-diagonal for packed
  SFT, per-row causal for pairs); with Transformer Engine the batch is THD (cu_seqlens) and no mask exists.
- adapter_init (SFT of a LoRA task adapter on the frozen palettized base): gradients and optimizer state
  only for the adapter's parameters; the base is held dequantized in the parameter dtype.
- throughput: training FLOPs per token 6·N + 12·L·h·s (the trainer's MFU formula) over the GPUs' peak
  (CIDERMILL_PEAK_TFLOPS, default 989: H100 dense bf16) at an assumed MFU (`--mfu`, default 0.4); LoRA
  training on a frozen base skips the weight-gradient matmuls: 4·N instead of 6·N.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

from .memory import GiB, MemoryPlan, _size, activation_bytes, plan_memory

ROWS_PER_ITEM = {"sft": 1, "rm": 2, "dpo": 2}


def lora_parameter_count(shape, rank: int) -> int:
    """Parameters of a rank-r LoRA on every decoder linear layer (qkv, proj, fc1, fc2): r·(in + out) each."""
    h, hd = shape.hidden_size, shape.head_dim
    qkv_out = (shape.num_attention_heads + 2 * shape.num_query_groups) * hd
    per_layer = rank * ((h + qkv_out) + (shape.num_attention_heads * hd + h) + (h + 2 * shape.ffn_hidden_size)
                        + (shape.ffn_hidden_size + h))
    return shape.num_layers * per_layer


def _adapter_rank(path: str | None) -> int:
    try:
        return int(json.loads((Path(path) / "adapter.json").read_text())["rank"])
    except (OSError, ValueError, KeyError, TypeError):
        return 16  # the report's recovery rank, when the adapter is not there yet


@dataclass(frozen=True)
class PostPlan:
    method: str
    memory: MemoryPlan  # in sequences: micro_batch = items x rows per item
    rows_per_item: int
    mask_bytes: int
    adapter_params: int
    largest_micro_batch: int  # in items (conversations packs or pairs)
    tokens_per_step: int
    flops_per_token: float
    step_seconds: float
    tokens_per_second: float
    mfu: float
    reference_pass_seconds: float  # DPO: the one-time reference log-prob pass over the training pairs

    @property
    def total(self) -> int:
        return self.memory.total + self.mask_bytes

    @property
    def fits(self) -> bool:
        return self.total <= self.memory.gpu_bytes

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["memory"] = self.memory.to_dict()
        return {**out, "total": self.total, "fits": self.fits}

    def table(self) -> str:
        m = self.memory
        unit = "pairs" if self.rows_per_item == 2 else "packed sequences"
        lines = [f"post-training {self.method}: micro-batch {m.micro_batch // self.rows_per_item} {unit} = "
                 f"{m.micro_batch} sequences of {m.seq_length}"
                 + (f"; LoRA only ({self.adapter_params:,} trainable parameters, base frozen)"
                    if self.adapter_params else "")]
        lines += m.table().splitlines()[:-2]
        lines.append(f"  {'attention mask (local kernels)':42} {_size(self.mask_bytes):>12}")
        lines.append(f"  {'total':42} {_size(self.total):>12}")
        lines.append(f"  {'fits' if self.fits else 'does NOT fit'}; largest micro-batch that fits: "
                     f"{self.largest_micro_batch} {unit}")
        lines.append(f"projected at MFU {self.mfu:.2f} (assumed): {self.step_seconds:.2f} s/step, "
                     f"{self.tokens_per_second:,.0f} tokens/s ({self.tokens_per_step:,} tokens per step, "
                     f"{self.flops_per_token / 1e9:.1f} GFLOP per token)")
        if self.reference_pass_seconds:
            lines.append(f"  + one-time reference log-prob pass: {self.reference_pass_seconds:.1f} s per 1,000 pairs")
        return "\n".join(lines)


def plan_post(cfg, *, gpus: int, gpu_bytes: int, micro_batch: int | None = None, mfu: float = 0.4) -> PostPlan:
    """The plan of a PostTrainConfig on `gpus` GPUs of `gpu_bytes` each."""
    from manifests.config import require_number

    from .memory import check_layout

    check_layout(cfg, gpus=gpus, micro_batch=micro_batch)
    require_number(mfu, "--mfu", gt=0, le=1)
    rows = ROWS_PER_ITEM[cfg.method]
    items = micro_batch or cfg.micro_batch
    p, shape, seq = cfg.parallel, cfg.model, cfg.seq_length
    tp = p.tensor_parallel
    mem = plan_memory(shape, gpus=gpus, gpu_bytes=gpu_bytes, seq_length=seq, micro_batch=items * rows,
                      tensor_parallel=tp, precision=p.precision, distributed_optimizer=p.distributed_optimizer,
                      recompute=p.recompute, kernels=p.kernels)
    adapter = lora_parameter_count(shape, _adapter_rank(cfg.adapter_init)) // tp if cfg.adapter_init else 0
    if adapter:  # grads and optimizer state of the adapter only (fp32 m, v; fp32 main copy under bf16)
        state = 8 + (4 if p.precision == "bf16" else 0)
        mem = dataclasses.replace(mem, grads=adapter * 4,
                                  optimizer=adapter * state // (mem.data_parallel if p.distributed_optimizer else 1))

    def mask(b_items: int) -> int:
        return 0 if p.kernels == "transformer_engine" else b_items * rows * seq * seq  # bool [b,1,s,s]

    def act(b_items: int) -> int:
        return activation_bytes(shape, micro_batch=b_items * rows, seq_length=seq, tp=tp,
                                act_bytes=2 if p.precision == "bf16" else 4, kernels=p.kernels,
                                recompute=p.recompute) + mask(b_items)

    fixed = mem.weights + mem.grads + mem.optimizer + mem.reserve
    largest = 0
    while largest < 4096 and fixed + act(largest + 1) <= gpu_bytes:
        largest += 1
    n = shape.parameter_count()["non_embedding"] + shape.vocab_size * shape.hidden_size
    weight_flops = (4 if adapter else 6) * n
    per_token = weight_flops + 12 * shape.num_layers * shape.num_attention_heads * shape.head_dim * seq
    tokens = cfg.global_batch * rows * seq
    peak = float(os.environ.get("CIDERMILL_PEAK_TFLOPS", 989)) * 1e12 * gpus
    step = per_token * tokens / (peak * mfu)
    ref = 0.0
    if cfg.method == "dpo":  # forward only: 2·N + 4·L·h·s per token, 2 rows of seq per pair
        fwd = 2 * n + 4 * shape.num_layers * shape.num_attention_heads * shape.head_dim * seq
        ref = fwd * 1000 * rows * seq / (peak * mfu)
    return PostPlan(method=cfg.method, memory=mem, rows_per_item=rows, mask_bytes=mask(items),
                    adapter_params=adapter, largest_micro_batch=largest, tokens_per_step=tokens,
                    flops_per_token=per_token, step_seconds=step, tokens_per_second=tokens / step, mfu=mfu,
                    reference_pass_seconds=ref)


def check_post_memory(cfg, log=print) -> None:
    """Refuse a post-training run the plan says does not fit (against parallel.gpu_memory, else the GPU's
    memory); nothing to check on a CPU run without a budget."""
    import torch
    import torch.distributed as dist

    from manifests.errors import ConfigError

    from manifests.config import parse_size

    budget = parse_size(cfg.parallel.gpu_memory, key="parallel.gpu_memory", where=cfg.name) if cfg.parallel.gpu_memory else None
    if budget is None and torch.cuda.is_available():
        budget = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    if budget is None:
        return
    plan = plan_post(cfg, gpus=dist.get_world_size() if dist.is_initialized() else 1, gpu_bytes=budget)
    if not plan.fits:
        raise ConfigError(f"{cfg.name}: the memory plan says this run does not fit; not starting.\n{plan.table()}")
    log(f"[{cfg.name}] memory plan: {plan.total / GiB:.1f} of {budget / GiB:.1f} GiB per GPU "
        f"(largest micro-batch {plan.largest_micro_batch})")
