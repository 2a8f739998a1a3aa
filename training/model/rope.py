"""RoPE inverse frequencies for the scalings released models use, written from their definitions.

    default: inv_freq_i = base^(-2i/d), i = 0 .. d/2-1
    linear:  inv_freq_i / factor                (every position divided by `factor`)
    llama3:  by wavelength w_i = 2π / inv_freq_i against the original context length L:
             w_i < L / high_freq_factor    -> unchanged (high frequencies: local order)
             w_i > L / low_freq_factor     -> divided by factor (low frequencies: stretched to the new length)
             otherwise                     -> (1 - t)·inv_freq_i/factor + t·inv_freq_i,
                                              t = (L / w_i - low_freq_factor) / (high - low)
Neither scaling changes attention's softmax temperature (Hugging Face's attention factor is 1 for both).
Other scalings (dynamic NTK, YaRN, LongRoPE) are refused where a config is read (training/hf_import.py).
"""

from __future__ import annotations

import math

import torch

from .shapes import ModelShape


def rope_inv_freq(shape: ModelShape, base: float) -> torch.Tensor:
    """[head_dim / 2] fp32 inverse frequencies on the CPU (megatron moves them to the device on first use)."""
    d = shape.head_dim
    inv = 1.0 / (float(base) ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    if shape.rope_scaling == "linear":
        return inv / shape.rope_factor
    if shape.rope_scaling == "llama3":
        factor, low, high = shape.rope_factor, shape.rope_low_freq_factor, shape.rope_high_freq_factor
        length = shape.rope_original_max_positions
        wavelen = 2 * math.pi / inv
        t = (length / wavelen - low) / (high - low)
        mid = (1 - t) * inv / factor + t * inv
        out = torch.where(wavelen > length / low, inv / factor, inv)
        return torch.where((wavelen >= length / high) & (wavelen <= length / low), mid, out)
    return inv
