"""Model FLOPs per token and the GPUs' dense bf16 peaks: what MFU (model FLOPs utilisation) is made of.

MFU = FLOPs per token x tokens/s / peak FLOP/s, with the FLOPs of the model's own arithmetic (not of
recomputation: a run with activation recompute does more work at the same MFU). Per token, for a
decoder-only transformer of N weights in its matmuls (every decoder linear layer plus the output projection,
which the tied embedding makes a V x h matmul; the input lookup costs nothing):

    forward   2·N + 4·L·a·d·S          (4·a·d·S per layer: Q·Kᵀ and P·V over S keys, counted in full)
    training  6·N + 12·L·a·d·S         (backward = 2 x forward)
    LoRA on a frozen base: 4·N + 12·L·a·d·S (no weight gradients for the base; activation gradients still flow)

L layers, a query heads, d head dim, S sequence length. The attention term counts every query against every
key (the usual convention, e.g. Megatron's and PaLM's MFU): a causal kernel skips half of it, so reported MFU
slightly overstates the useful work at long sequences, the same way for everyone who uses this formula.
"""

from __future__ import annotations

import os

# Dense bf16 tensor-core peaks from the vendors' datasheets, TFLOP/s per GPU (no 2:4 sparsity). Matched against
# torch.cuda.get_device_name() in order: the first row whose every word occurs in the name (case-insensitive).
PEAK_BF16_TFLOPS: tuple[tuple[tuple[str, ...], float], ...] = (
    (("H100", "PCIe"), 756.0),
    (("H100", "NVL"), 835.0),
    (("H100",), 989.0),  # SXM ("NVIDIA H100 80GB HBM3")
    (("H200",), 989.0),
    (("H800",), 989.0),
    (("GH200",), 989.0),
    (("B200",), 2250.0),
    (("B100",), 1750.0),
    (("A100",), 312.0),
    (("A800",), 312.0),
    (("L40S",), 362.0),
    (("L40",), 181.0),
    (("L4",), 121.0),
)
DEFAULT_PEAK_ENV = "CIDERMILL_PEAK_TFLOPS"


def peak_tflops(device_name: str | None) -> tuple[float | None, str]:
    """(dense bf16 peak in TFLOP/s, where the number came from) for a GPU name. $CIDERMILL_PEAK_TFLOPS
    overrides the table; an unknown GPU gives (None, reason), and MFU is then not reported."""
    if os.environ.get(DEFAULT_PEAK_ENV):
        return float(os.environ[DEFAULT_PEAK_ENV]), f"${DEFAULT_PEAK_ENV}"
    name = (device_name or "").lower()
    for words, tflops in PEAK_BF16_TFLOPS:
        if all(w.lower() in name for w in words):
            return tflops, f"table row {' '.join(words)}"
    return None, f"no dense bf16 peak known for {device_name!r}; set ${DEFAULT_PEAK_ENV}"


def matmul_parameters(shape) -> int:
    """N: the weights that take part in a matmul per token (decoder linears, norms' gains are negligible but
    counted, plus the output projection V x h)."""
    return shape.parameter_count()["non_embedding"] + shape.vocab_size * shape.hidden_size


def flops_per_token(shape, seq_length: int, *, training: bool = True, frozen_base: bool = False) -> float:
    """Model FLOPs per token (see the module docstring). `frozen_base`: LoRA-style training without weight
    gradients for the base."""
    weight_passes = (4 if frozen_base else 6) if training else 2
    attention = (12 if training else 4) * shape.num_layers * shape.num_attention_heads * shape.head_dim * seq_length
    return float(weight_passes * matmul_parameters(shape) + attention)


def mfu(shape, seq_length: int, tokens_per_second_per_gpu: float, peak: float | None) -> float | None:
    """Model FLOPs utilisation of one GPU (peak in TFLOP/s), or None when the peak is unknown."""
    if not peak:
        return None
    return flops_per_token(shape, seq_length) * tokens_per_second_per_gpu / (peak * 1e12)
