"""LoRA adapters on megatron-core's linear layers, attached to a running model by forward hooks.

    y = W x + (alpha / r) · B (A x)         A [r, in], B [out, r]

Tensor parallelism (megatron's split of W):
    ColumnParallelLinear (linear_qkv, linear_fc1): W is split along outputs, every rank sees the whole input.
        A is replicated [r, in]; B is split like W [out/tp, r]; the rank's LoRA output lands on its own
        output shard, no communication.
    RowParallelLinear (linear_proj, linear_fc2): W is split along inputs, each rank holds an input shard and
        megatron all-reduces the partial outputs. A is split like W [r, in/tp]; A x is all-reduced over the
        tensor-parallel group (an [.., r] tensor, cheap), then the replicated B [out, r] is applied and added
        after megatron's reduction. (Sequence parallelism is not handled: the hooks refuse it.)
On the CPU TP = 1 and both reduce to the plain formula.

The base is never modified: an adapter is a set of hooks plus its own parameters (`Adapter`), so
`attach`/`detach` swap adapters on a running model without rebuilding it, and the base's state dict stays
the palettized weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from manifests.errors import ConfigError

TARGETS = ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")
ROW_PARALLEL = ("linear_proj", "linear_fc2")


@dataclass(frozen=True, kw_only=True)
class LoraConfig:
    rank: int = 16
    alpha: float | None = None  # default: rank (scale 1)
    targets: tuple[str, ...] = TARGETS
    init: str = "zero"  # "zero": A random, B = 0 (the adapter starts as the identity); "svd": from W - W_hat

    def __post_init__(self):
        if self.rank < 1:
            raise ConfigError(f"lora: rank must be >= 1; got {self.rank}")
        if self.init not in ("zero", "svd"):
            raise ConfigError(f"lora: init must be 'zero' or 'svd'; got {self.init!r}")
        unknown = set(self.targets) - set(TARGETS)
        if unknown:
            raise ConfigError(f"lora: unknown targets {sorted(unknown)}; known: {', '.join(TARGETS)}")

    @property
    def scale(self) -> float:
        return (self.alpha if self.alpha is not None else self.rank) / self.rank


def _tp():
    from megatron.core import parallel_state

    return parallel_state.get_tensor_model_parallel_world_size()


def target_modules(model, targets=TARGETS) -> dict[str, torch.nn.Module]:
    """name -> megatron linear module for every decoder linear layer whose last name part is in `targets`."""
    found = {name: m for name, m in model.named_modules() if name.split(".")[-1] in targets}
    if not found:
        raise ConfigError(f"lora: the model has no {', '.join(targets)} layers")
    return found


@dataclass
class Adapter:
    """One adapter's parameters: `A[name]`, `B[name]` per target module name, and its config."""
    config: LoraConfig
    A: torch.nn.ParameterDict
    B: torch.nn.ParameterDict
    meta: dict = field(default_factory=dict)

    def parameters(self):
        return list(self.A.values()) + list(self.B.values())

    def state_dict(self) -> dict[str, torch.Tensor]:
        out = {}
        for key in self.A:
            out[f"{key}.lora_A"] = self.A[key].detach().cpu().contiguous()
            out[f"{key}.lora_B"] = self.B[key].detach().cpu().contiguous()
        return out

    def delta(self, key: str) -> torch.Tensor:
        """The weight this adapter adds to module `key` (this rank's shard): scale · B A."""
        return self.config.scale * (self.B[key] @ self.A[key])


def copy_adapter(adapter: Adapter) -> Adapter:
    """An independent copy (new parameters, same values, same config)."""
    A = torch.nn.ParameterDict({k: torch.nn.Parameter(v.detach().clone()) for k, v in adapter.A.items()})
    B = torch.nn.ParameterDict({k: torch.nn.Parameter(v.detach().clone()) for k, v in adapter.B.items()})
    return Adapter(config=adapter.config, A=A, B=B, meta=dict(adapter.meta))


def _key(name: str) -> str:
    return name.replace(".", "/")  # ParameterDict keys may not contain dots


def new_adapter(model, config: LoraConfig, *, seed: int = 0, residual: dict[str, torch.Tensor] | None = None) -> Adapter:
    """An adapter for `model`'s target layers. init "zero": A ~ U(-1/sqrt(in), 1/sqrt(in)) (PEFT's
    kaiming-uniform(a=sqrt 5) bound), B = 0. init "svd": `residual[name]` = W - W_hat (this rank's shard);
    B A = its best rank-r approximation (B = U_r sqrt(S_r) / scale, A = sqrt(S_r) V_r^T), so the adapted
    model starts at W_hat + (W - W_hat)_r."""
    gen = torch.Generator().manual_seed(seed)
    A, B = torch.nn.ParameterDict(), torch.nn.ParameterDict()
    for name, module in target_modules(model, config.targets).items():
        out_f, in_f = module.weight.shape
        r = config.rank
        if config.init == "svd":
            if residual is None or name + ".weight" not in residual:
                raise ConfigError(f"lora: init 'svd' needs the quantization residual of {name}")
            u, s, vh = torch.linalg.svd(residual[name + ".weight"].float(), full_matrices=False)
            r_eff = min(r, s.numel())
            root = s[:r_eff].sqrt()
            a = torch.zeros(r, in_f)
            b = torch.zeros(out_f, r)
            a[:r_eff] = root[:, None] * vh[:r_eff]
            b[:, :r_eff] = u[:, :r_eff] * root[None] / config.scale
        else:
            bound = 1 / math.sqrt(in_f)
            a = (torch.rand(r, in_f, generator=gen) * 2 - 1) * bound
            b = torch.zeros(out_f, r)
        dev, dtype = module.weight.device, module.weight.dtype
        A[_key(name)] = torch.nn.Parameter(a.to(dev, dtype))
        B[_key(name)] = torch.nn.Parameter(b.to(dev, dtype))
    return Adapter(config=config, A=A, B=B)


class AdapterHost:
    """Holds the hooks of the adapter currently attached to a model. attach(adapter) replaces whatever was
    attached; detach() restores the base model exactly (the hooks are removed, nothing was changed)."""

    def __init__(self, model):
        self.model = model
        self.active: Adapter | None = None
        self._handles: list = []

    def attach(self, adapter: Adapter) -> None:
        self.detach()
        modules = dict(self.model.named_modules())
        for key in adapter.A:
            name = key.replace("/", ".")
            if name not in modules:
                raise ConfigError(f"lora: adapter targets {name}, which this model does not have")
            row = name.split(".")[-1] in ROW_PARALLEL
            self._handles.append(modules[name].register_forward_hook(self._hook(adapter, key, row)))
        self.active = adapter

    def detach(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
        self.active = None

    @staticmethod
    def _hook(adapter: Adapter, key: str, row_parallel: bool):
        A, B, scale = adapter.A[key], adapter.B[key], adapter.config.scale

        def hook(module, args, output):
            if getattr(module, "sequence_parallel", False):
                raise ConfigError("lora: sequence parallelism is not supported by the adapter hooks")
            x = args[0]
            h = x @ A.t()
            if row_parallel and _tp() > 1:
                from megatron.core.tensor_parallel import reduce_from_tensor_model_parallel_region

                h = reduce_from_tensor_model_parallel_region(h)
            y = scale * (h @ B.t())
            out, bias = output
            return out + y.to(out.dtype), bias

        return hook


def merged_state(base_state: dict[str, torch.Tensor], adapter: Adapter) -> dict[str, torch.Tensor]:
    """The base state dict with W + scale · B A folded in (the reference an attached adapter must equal)."""
    out = dict(base_state)
    for key in adapter.A:
        name = key.replace("/", ".") + ".weight"
        out[name] = base_state[name] + adapter.delta(key).detach().to(base_state[name].dtype)
    return out
