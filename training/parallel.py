"""Process groups and seeds, configured apart from the model (torchrun on GPUs, one process on CPU).

Under torchrun (RANK/WORLD_SIZE/LOCAL_RANK set) this joins the NCCL job and builds megatron's tensor-,
pipeline- and data-parallel groups from `ParallelConfig`; data parallelism is what is left of the world
size. Without CUDA it starts a one-process gloo group (an in-memory store, no port) and applies the CPU shim.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from manifests.config import parse_size
from manifests.errors import ConfigError

from . import cpu_shim


@dataclass(frozen=True, kw_only=True)
class ParallelConfig:
    tensor_parallel: int = 1
    pipeline_parallel: int = 1  # kept at 1: the loop runs no pipeline schedule
    # "bf16": megatron's native bf16 path on GPU (bf16 weights in Float16Module, fp32 grad buffer, fp32 main
    # weights in the optimizer); on CPU it is ignored (fp32)
    precision: str = "fp32"
    distributed_optimizer: bool = False  # GPU: megatron's DistributedOptimizer shards optimizer state over DP
    recompute: str = "none"  # activation recomputation: none | selective (core attention) | full (each layer)
    # bit-for-bit repeatable runs: torch deterministic algorithms, cuBLAS workspace pinned, megatron's
    # deterministic_mode (no atomics in its kernels), NCCL ring all-reduce; slower on GPU
    deterministic: bool = False
    gpu_memory: str | None = None  # per-GPU budget `train` checks the memory plan against (default: the device's)
    # "local": megatron-core's own modules (CPU and GPU; attention materialises [B,heads,S,S]);
    # "transformer_engine": TE's fused modules and flash attention, needed for long sequences on GPU.
    # Keep one choice for a whole chain of stages: the two name their weights differently.
    kernels: str = "local"

    def __post_init__(self):
        if self.tensor_parallel < 1:
            raise ConfigError(f"parallel.tensor_parallel must be >= 1; got {self.tensor_parallel}")
        if self.pipeline_parallel != 1:
            raise ConfigError("parallel.pipeline_parallel must be 1: this trainer has no pipeline schedule yet")
        if self.precision not in ("fp32", "bf16"):
            raise ConfigError(f"parallel.precision must be 'fp32' or 'bf16'; got {self.precision!r}")
        if self.distributed_optimizer and self.precision != "bf16":
            raise ConfigError("parallel.distributed_optimizer needs precision: bf16 (megatron's fp32 shards are "
                              "views of the weights, which this trainer's optimizer does not take)")
        if self.recompute not in ("none", "selective", "full"):
            raise ConfigError(f"parallel.recompute must be 'none', 'selective' or 'full'; got {self.recompute!r}")
        if self.gpu_memory is not None:
            parse_size(self.gpu_memory, key="parallel.gpu_memory", where="the run config")
        if self.kernels not in ("local", "transformer_engine"):
            raise ConfigError(f"parallel.kernels must be 'local' or 'transformer_engine'; got {self.kernels!r}")


def device() -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def setup(parallel: ParallelConfig, *, seed: int = 1234) -> None:
    """Idempotent: (re)builds megatron's groups when the degrees change, then seeds (see seed_everything)."""
    from megatron.core import parallel_state

    if parallel.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        os.environ.setdefault("NCCL_ALGO", "Ring")
        torch.use_deterministic_algorithms(True)
    if cpu_shim.apply():
        # Tiny CPU models run fastest on one intra-op thread; with 2 threads on cores shared with other
        # processes, torch's spinning workers made a 30-step run 16x slower (measured: 1.8 s vs 29 s).
        torch.set_num_threads(int(os.environ.get("CIDERMILL_TORCH_THREADS", "1")))
    if not dist.is_initialized():
        if torch.cuda.is_available() and "RANK" in os.environ:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
            dist.init_process_group("nccl")
        elif "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", 1)) > 1:
            dist.init_process_group("gloo")
        else:  # one process: an in-memory store, no port to pick
            backend = "nccl" if torch.cuda.is_available() else "gloo"
            dist.init_process_group(backend, store=dist.HashStore(), world_size=1, rank=0)
    world = dist.get_world_size()
    if world % parallel.tensor_parallel:
        raise ConfigError(f"world size {world} is not divisible by parallel.tensor_parallel={parallel.tensor_parallel}")
    if parallel_state.model_parallel_is_initialized() and \
            parallel_state.get_tensor_model_parallel_world_size() != parallel.tensor_parallel:
        parallel_state.destroy_model_parallel()
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(parallel.tensor_parallel, parallel.pipeline_parallel)
    seed_everything(seed)


def data_parallel_rank_and_size() -> tuple[int, int]:
    from megatron.core import parallel_state

    return parallel_state.get_data_parallel_rank(), parallel_state.get_data_parallel_world_size()


def seed_everything(seed: int) -> None:
    """Same seed on every rank for the model init; megatron's tracker offsets it per tensor-parallel rank."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        from megatron.core import tensor_parallel

        tensor_parallel.model_parallel_cuda_manual_seed(seed)
    else:
        cpu_shim.init_rng_tracker()


def is_main() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0
