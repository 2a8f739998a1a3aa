"""Batched 1-D k-means (k-means++ seeding with a fixed seed, then Lloyd) and bit packing of the indices.

Every lookup table (LUT) is the k-means of one group of weights: `x` [G, N] holds G independent groups of N
scalars, and all G are clustered at once (one [G, N, K] distance tensor per chunk of groups), which is what
makes per-group palettization of a large layer a few tensor ops instead of a Python loop over groups.
"""

from __future__ import annotations

import numpy as np
import torch


def kmeans_pp_init(x: torch.Tensor, k: int, *, generator: torch.Generator, trials: int | None = None) -> torch.Tensor:
    """Greedy k-means++ seeding per row of `x` [G, N]: the first centre uniformly; for each next one,
    `trials` candidates drawn with probability proportional to the squared distance to the nearest centre
    so far, keeping the candidate that lowers the total squared distance most (Arthur & Vassilvitskii's
    seeding with the greedy trials scikit-learn also uses, 2 + log k by default). Returns [G, k]."""
    g, n = x.shape
    trials = trials or 2 + int(np.log(k))
    rows = torch.arange(g)
    first = torch.randint(n, (g,), generator=generator)
    centres = [x[rows, first]]
    d2 = (x - centres[0][:, None]) ** 2
    for _ in range(1, k):
        # rows whose points all coincide with a centre: draw uniformly (any point is as good)
        weights = torch.where(d2.sum(1, keepdim=True) > 0, d2, torch.ones_like(d2))
        picks = torch.multinomial(weights, trials, replacement=True, generator=generator)  # [G, T]
        cand = x.gather(1, picks)  # [G, T]
        new_d2 = torch.minimum(d2[:, None, :], (x[:, None, :] - cand[:, :, None]) ** 2)  # [G, T, N]
        best = new_d2.sum(2).argmin(1)
        centres.append(cand[rows, best])
        d2 = new_d2[rows, best]
    return torch.stack(centres, 1)


def kmeans(x: torch.Tensor, k: int, *, seed: int = 0, iters: int = 50, weights: torch.Tensor | None = None,
           chunk: int = 256, trials: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """k-means of each row of `x` [G, N] into `k` centres. Returns (centres [G, k] sorted ascending,
    indices [G, N] int64). `weights` [G, N] (optional, >= 0): weighted k-means (e.g. by calibration
    activations). Deterministic for a given seed. A centre that loses all its points keeps its value."""
    x = x.detach().float()
    gen = torch.Generator().manual_seed(seed)
    out_c, out_i = [], []
    for start in range(0, x.shape[0], chunk):
        xs = x[start:start + chunk]
        ws = None if weights is None else weights[start:start + chunk].float()
        c = kmeans_pp_init(xs, k, generator=gen, trials=trials)
        idx = None
        for _ in range(iters):
            new = (xs[:, :, None] - c[:, None, :]).abs().argmin(-1)
            if idx is not None and torch.equal(new, idx):
                break
            idx = new
            onehot = torch.nn.functional.one_hot(idx, k).float()  # [g, N, k]
            if ws is not None:
                onehot = onehot * ws[:, :, None]
            mass = onehot.sum(1)
            total = torch.einsum("gn,gnk->gk", xs, onehot)
            c = torch.where(mass > 0, total / mass.clamp(min=1e-30), c)
        c, order = c.sort(1)
        rank = order.argsort(1)  # old centre id -> its position after sorting
        out_c.append(c)
        out_i.append(rank.gather(1, idx))
    return torch.cat(out_c), torch.cat(out_i)


def pack(indices: np.ndarray, bits: int) -> np.ndarray:
    """Pack integers in [0, 2**bits) into bytes, 8/bits per byte, the first index in the low bits."""
    if bits not in (1, 2, 4, 8):
        raise ValueError(f"pack: bits must be 1, 2, 4 or 8; got {bits}")
    flat = np.asarray(indices, dtype=np.uint8).reshape(-1)
    if flat.size and int(flat.max()) >= 1 << bits:
        raise ValueError(f"pack: an index {int(flat.max())} does not fit in {bits} bits")
    per = 8 // bits
    flat = np.concatenate([flat, np.zeros((-flat.size) % per, np.uint8)]).reshape(-1, per)
    shifts = (np.arange(per, dtype=np.uint8) * bits)[None, :]
    return np.bitwise_or.reduce(flat << shifts, axis=1).astype(np.uint8)


def unpack(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """Inverse of `pack`: the first `count` indices (uint8)."""
    per = 8 // bits
    shifts = (np.arange(per, dtype=np.uint8) * bits)[None, :]
    values = (np.asarray(packed, np.uint8)[:, None] >> shifts) & np.uint8((1 << bits) - 1)
    out = values.reshape(-1)
    if out.size < count:
        raise ValueError(f"unpack: {packed.size} bytes hold {out.size} {bits}-bit indices, fewer than {count}")
    return out[:count]
