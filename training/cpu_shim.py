"""The only place that works around megatron-core's hard-coded CUDA; applied only when CUDA is absent.

megatron-core 0.16.1 calls `torch.cuda.current_device()` when it allocates RoPE frequencies, the global
memory buffer and several scratch tensors, builds the default causal mask with `device="cuda"`, and its
RNG tracker forks CUDA generator states around attention dropout. On a CPU-only machine (tests, laptops):

- `torch.cuda.current_device` returns the CPU device, so those allocations land on the CPU;
- the default causal mask is built on the CPU;
- the RNG tracker is megatron's no-op ("inference") tracker: `fork()` is a null context, so dropout (0 in
  our configs) would draw from torch's CPU generator, which `parallel.seed_everything` seeds;
- activation recomputation (`tensor_parallel.checkpoint`) saves and restores the CUDA generator state: on
  the CPU there is none, so those two calls do nothing (the CPU generator is still saved and restored).

Nothing here runs on a GPU machine: `apply()` returns False there and megatron-core runs unmodified.
"""

from __future__ import annotations

import torch

_applied = False


def needed() -> bool:
    return not torch.cuda.is_available()


def _cpu_causal_mask(sq: int, skv: int | None = None) -> torch.Tensor:
    # True above the diagonal = masked, the convention of megatron.core.transformer.utils.
    return torch.triu(torch.ones(sq, skv or sq, dtype=torch.bool), diagonal=1)


def apply() -> bool:
    """Install the CPU workarounds once; returns whether they are active."""
    global _applied
    if not needed():
        return False
    if _applied:
        return True
    import megatron.core.fusions.fused_softmax as fused_softmax
    import megatron.core.tensor_parallel.random as mp_random
    import megatron.core.transformer.utils as transformer_utils

    torch.cuda.current_device = lambda: torch.device("cpu")  # type: ignore[assignment]
    transformer_utils.get_default_causal_mask = _cpu_causal_mask
    fused_softmax.get_default_causal_mask = _cpu_causal_mask  # imported by name there
    mp_random._get_cuda_rng_state = lambda *args, **kwargs: None
    mp_random._set_cuda_rng_state = lambda *args, **kwargs: None
    _applied = True
    return True


def init_rng_tracker() -> None:
    """CPU replacement for `model_parallel_cuda_manual_seed` (which asserts CUDA)."""
    from megatron.core import tensor_parallel

    tensor_parallel.random.initialize_rng_tracker(inference_rng_tracker=True, force_reset=True)
