"""Per-GPU memory plan of a run (`cidermill train plan`), and the check that `train` makes before starting.

Everything is bytes on one GPU for one model replica shard (tensor-parallel degree t, data-parallel degree
d = gpus / t):

- weights: this rank's parameters (embedding and linear layers split by t, norm gains replicated), in the
  parameter dtype: bf16 (megatron's native bf16 path: `Float16Module`, 2 B) or fp32 (4 B).
- grads: megatron DDP's contiguous gradient buffer, fp32 (4 B) in both cases (`grad_reduce_in_fp32`).
- optimizer: per parameter the AFM optimizer's two states (m, v; AdamW's exp_avg, exp_avg_sq likewise) in
  fp32, plus fp32 main weights when the parameters are bf16: 8 or 12 B, divided by d with the distributed
  optimizer (ZeRO-1: each data-parallel rank owns 1/d of the optimizer state).
- activations: what the forward pass keeps for backward, per micro-batch (see `layer_activation_bytes`),
  times the number of layers, plus the logits and the loss's fp32 log-probabilities.
- teacher: an online teacher's weights (bf16 or fp32, split by t) and its forward working set (one layer's
  activations and its logits; nothing is kept for backward). A precomputed top-1 teacher costs nothing.
- reserve: CUDA context, NCCL buffers and allocator fragmentation, a fixed allowance (default 6 GiB).

The activation counts are those of megatron-core 0.16.1's local layer spec, tensor by tensor (checked against
the tensors autograd saves at tiny shapes in tests/training/test_memory_plan.py). With Transformer Engine
kernels, attention is flash attention: no [b, heads, s, s] tensor is kept, and neither are the GQA copies of
K and V; that variant is an estimate here (no GPU to measure it on).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from manifests.config import require_number
from manifests.errors import ConfigError

from .model.shapes import ModelShape

GiB = 1024 ** 3
def _size(n: int) -> str:
    return f"{n / GiB:.2f} GiB" if n >= GiB // 10 else f"{n / 1024 ** 2:.2f} MiB"


def rank_parameter_count(shape: ModelShape, tp: int) -> int:
    """Parameters held by one tensor-parallel rank: linear layers and the vocabulary split by `tp`."""
    h, hd, a, g = shape.hidden_size, shape.head_dim, shape.num_attention_heads, shape.num_query_groups
    for name, n in (("num_attention_heads", a), ("num_query_groups", g), ("ffn_hidden_size", shape.ffn_hidden_size),
                    ("vocab_size", shape.vocab_size)):
        if n % tp:
            raise ConfigError(f"model {shape.name}: {name}={n} is not divisible by tensor_parallel={tp}")
    linear = h * (a + 2 * g) * hd + a * hd * h + 3 * h * shape.ffn_hidden_size
    norms = 2 * h + 2 * hd
    return shape.vocab_size * h // tp + shape.num_layers * (linear // tp + norms) + h


def layer_activation_bytes(shape: ModelShape, *, micro_batch: int, seq_length: int, tp: int = 1,
                           act_bytes: int = 4, kernels: str = "local", recompute: str = "none") -> int:
    """Bytes one transformer layer keeps for backward, for one micro-batch (no sequence parallelism).

    Per token, in elements of the activation dtype (local spec):
      6h          input and pre-MLP RMSNorm: input, x·rstd, and the gained output (the next linear's input)
      5F/t        fc1 output [gate; up] (2F), the copy of `up`, silu(gate), and fc2's input
      5·a·hd/t    queries: the q-norm's x·rstd and output, the RoPE output, the attention context
      3·g·hd/t    the fused QKV output's key/value part and the k-norm's tensors
      2·a·hd/t    K and V repeated to every query head (grouped-query attention, when 1 < g < a)
      a/t + g/t + 2   the norms' rstd values
    plus per sequence: softmax probabilities b·(a/t)·s² (fp32; and a bf16 copy for the next matmul under
    bf16), the causal mask s² (1 B) and RoPE's cos/sin 4·s·hd (fp32).

    `selective` recomputes megatron's core attention (its default `recompute_modules=['core_attn']`): the
    softmax, the mask and the K/V copies are not kept. `full` keeps only each layer's input; the layer's
    own working set is counted once by `activation_bytes`.
    """
    h, hd, a, g, f = (shape.hidden_size, shape.head_dim, shape.num_attention_heads, shape.num_query_groups,
                      shape.ffn_hidden_size)
    b, s = micro_batch, seq_length
    if recompute == "full":
        return b * s * h * act_bytes
    attention_core = recompute == "none" and kernels == "local"
    per_token = 6 * h + 2 + (5 * f + 5 * a * hd + 3 * g * hd + a + g) // tp
    if attention_core and 1 < g < a:
        per_token += 2 * a * hd // tp
    total = b * s * per_token * act_bytes
    if attention_core:
        softmax = 4 + (2 if act_bytes == 2 else 0)
        total += b * (a // tp) * s * s * softmax + s * s
    if kernels == "local":
        total += 4 * s * hd * 4
    return total


def logits_bytes(shape: ModelShape, *, micro_batch: int, seq_length: int, tp: int, act_bytes: int) -> int:
    """The logits [b, s, V/t] (alive until backward) and the loss's fp32 log-probabilities (megatron's
    vocab-parallel loss keeps a second fp32 copy when t > 1)."""
    per_token = shape.vocab_size // tp * (act_bytes + (4 if tp == 1 else 8))
    return micro_batch * seq_length * per_token


def activation_bytes(shape: ModelShape, *, micro_batch: int, seq_length: int, tp: int = 1, act_bytes: int = 4,
                     kernels: str = "local", recompute: str = "none") -> int:
    """All layers' saved activations, the embedding output and final norm, and the logits."""
    kw = dict(micro_batch=micro_batch, seq_length=seq_length, tp=tp, act_bytes=act_bytes, kernels=kernels)
    layers = shape.num_layers * layer_activation_bytes(shape, recompute=recompute, **kw)
    if recompute == "full":  # the layer being recomputed holds its whole working set during its backward
        layers += layer_activation_bytes(shape, recompute="none", **kw)
    # the final norm (input, x·rstd, output, rstd) and two int64 id tensors (embedding and loss gathers)
    edges = micro_batch * seq_length * ((3 * shape.hidden_size + 1) * act_bytes + 16)
    return layers + edges + logits_bytes(shape, micro_batch=micro_batch, seq_length=seq_length, tp=tp,
                                         act_bytes=act_bytes)


@dataclass(frozen=True, kw_only=True)
class MemoryPlan:
    gpus: int
    tensor_parallel: int
    data_parallel: int
    gpu_bytes: int
    micro_batch: int
    seq_length: int
    precision: str
    distributed_optimizer: bool
    recompute: str
    kernels: str
    weights: int
    grads: int
    optimizer: int
    activations: int  # for `micro_batch`
    activations_per_sample: int  # the part that grows with the micro-batch (for one more sample)
    teacher: int
    reserve: int
    largest_micro_batch: int  # 0: not even one sample fits

    @property
    def total(self) -> int:
        return self.weights + self.grads + self.optimizer + self.activations + self.teacher + self.reserve

    @property
    def fits(self) -> bool:
        return self.total <= self.gpu_bytes

    def to_dict(self) -> dict:
        return {**asdict(self), "total": self.total, "fits": self.fits}

    def table(self) -> str:
        rows = [("weights", self.weights), ("grads", self.grads), ("optimizer state", self.optimizer),
                (f"activations (micro-batch {self.micro_batch})", self.activations), ("teacher", self.teacher),
                ("reserve (context, NCCL, fragmentation)", self.reserve), ("total", self.total)]
        head = (f"per-GPU memory on {self.gpus} GPU(s) of {self.gpu_bytes / GiB:.1f} GiB: tensor-parallel "
                f"{self.tensor_parallel}, data-parallel {self.data_parallel}, {self.precision} weights, "
                f"{'distributed' if self.distributed_optimizer else 'replicated'} optimizer, recompute "
                f"{self.recompute}, {self.kernels} kernels, sequence {self.seq_length}")
        lines = [head] + [f"  {name:42} {_size(n):>12}" for name, n in rows]
        verdict = "fits" if self.fits else "does NOT fit"
        lines.append(f"  {verdict}; largest micro-batch that fits: {self.largest_micro_batch}")
        return "\n".join(lines)


def plan_memory(shape: ModelShape, *, gpus: int, gpu_bytes: int, seq_length: int, micro_batch: int,
                tensor_parallel: int = 1, precision: str = "fp32", distributed_optimizer: bool = False,
                recompute: str = "none", kernels: str = "local", teacher: ModelShape | None = None,
                reserve_bytes: int = 6 * GiB) -> MemoryPlan:
    require_number(gpus, "--gpus", ge=1, integer=True)
    require_number(gpu_bytes, "--gpu-mem", gt=0)
    require_number(seq_length, "seq_length", ge=1, integer=True)
    require_number(micro_batch, "micro_batch", ge=1, integer=True)
    if gpus % tensor_parallel:
        raise ConfigError(f"{gpus} GPUs are not divisible by tensor_parallel={tensor_parallel}")
    dp = gpus // tensor_parallel
    n = rank_parameter_count(shape, tensor_parallel)
    param_bytes = 2 if precision == "bf16" else 4
    state_bytes = 8 + (4 if precision == "bf16" else 0)  # m, v (+ fp32 main weights)
    optimizer = n * state_bytes // (dp if distributed_optimizer else 1)
    kw = dict(seq_length=seq_length, tp=tensor_parallel, act_bytes=param_bytes, kernels=kernels)
    teacher_weights = rank_parameter_count(teacher, tensor_parallel) * param_bytes if teacher else 0

    def teacher_work(b: int) -> int:  # a no-grad forward: one layer's working set and the logits
        if teacher is None:
            return 0
        return layer_activation_bytes(teacher, micro_batch=b, recompute="none", **kw) \
            + logits_bytes(teacher, micro_batch=b, seq_length=seq_length, tp=tensor_parallel, act_bytes=param_bytes)

    def per_batch(b: int) -> int:
        return activation_bytes(shape, micro_batch=b, recompute=recompute, **kw) + teacher_work(b)

    fixed = n * param_bytes + n * 4 + optimizer + teacher_weights + reserve_bytes
    largest = 0
    while largest < 4096 and fixed + per_batch(largest + 1) <= gpu_bytes:
        largest += 1
    return MemoryPlan(gpus=gpus, tensor_parallel=tensor_parallel, data_parallel=dp, gpu_bytes=gpu_bytes,
                      micro_batch=micro_batch, seq_length=seq_length, precision=precision,
                      distributed_optimizer=distributed_optimizer, recompute=recompute, kernels=kernels,
                      weights=n * param_bytes, grads=n * 4, optimizer=optimizer,
                      activations=activation_bytes(shape, micro_batch=micro_batch, recompute=recompute, **kw),
                      activations_per_sample=activation_bytes(shape, micro_batch=1, recompute=recompute, **kw),
                      teacher=teacher_weights + teacher_work(micro_batch), reserve=reserve_bytes,
                      largest_micro_batch=largest)


def check_layout(cfg, *, gpus: int, micro_batch: int | None = None) -> None:
    """What the trainer would refuse on `gpus` GPUs, refused by the plan too: a count that is not a whole
    number of tensor-parallel groups, or a global batch that does not split into micro-batches per rank."""
    require_number(gpus, "--gpus", ge=1, integer=True)
    tp = cfg.parallel.tensor_parallel
    if gpus % tp:
        raise ConfigError(f"--gpus {gpus} is not a multiple of parallel.tensor_parallel {tp} in {cfg.name}")
    if micro_batch is not None:  # a what-if on the micro-batch: its memory is the question, not the batch split
        require_number(micro_batch, "--micro-batch", ge=1, integer=True)
        return
    mb, dp = cfg.micro_batch, gpus // tp
    if cfg.global_batch % (mb * dp):
        raise ConfigError(f"{cfg.name}: global_batch {cfg.global_batch} is not a multiple of micro_batch {mb} x "
                          f"data-parallel size {dp} (= {gpus} GPUs / tensor_parallel {tp}); the trainer would "
                          "refuse this run")


def plan_for_config(cfg, *, gpus: int, gpu_bytes: int, seq_length: int | None = None,
                    micro_batch: int | None = None) -> MemoryPlan:
    """The plan of run config `cfg` (a TrainConfig); the sequence length comes from the config, else from its
    mixture manifest, else `seq_length`; an online teacher's shape from its checkpoint, else
    `distill.teacher_shape`."""
    from .model.shapes import get_shape

    check_layout(cfg, gpus=gpus, micro_batch=micro_batch)
    seq = seq_length or cfg.seq_length
    if seq is None:
        try:
            from .plan import plan_run

            seq = plan_run(cfg).seq_length
        except Exception as exc:  # noqa: BLE001 - any reason the mixture cannot be read
            raise ConfigError(f"{cfg.name}: no seq_length in the config and its mixture cannot be read ({exc}); "
                              "pass --seq-length") from None
    teacher = None
    if cfg.distill is not None and cfg.distill.teacher:
        try:
            from .checkpoint import open_checkpoint

            raw = dict(open_checkpoint(cfg.distill.teacher).manifest["model_shape"])
            teacher = get_shape(raw.pop("name"), **raw)
        except Exception:  # noqa: BLE001 - the teacher is not trained yet
            if not cfg.distill.teacher_shape:
                raise ConfigError(f"{cfg.name}: teacher checkpoint {cfg.distill.teacher} cannot be read; set "
                                  "distill.teacher_shape to plan without it") from None
            teacher = get_shape(cfg.distill.teacher_shape)
    p = cfg.parallel
    return plan_memory(cfg.model, gpus=gpus, gpu_bytes=gpu_bytes, seq_length=seq,
                       micro_batch=micro_batch or cfg.micro_batch, tensor_parallel=p.tensor_parallel,
                       precision=p.precision, distributed_optimizer=p.distributed_optimizer, recompute=p.recompute,
                       kernels=p.kernels, teacher=teacher)
