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
    indices [G, N] int64: each point's nearest centre). `weights` [G, N] (optional, >= 0): weighted k-means
    (e.g. by calibration activations). Deterministic for a given seed. A centre that loses all its points
    keeps its value.

    Lloyd's steps run on the sorted points: in one dimension the points nearest each of the sorted centres
    are a contiguous run between the midpoints of neighbouring centres, so an assignment is k - 1 binary
    searches and an update is two lookups into prefix sums of w and w·x. After one O(N log N) sort per row,
    an iteration costs O(k log N) instead of the O(N·k) of scoring every point against every centre."""
    x = x.detach().float()
    gen = torch.Generator().manual_seed(seed)
    out_c, out_i = [], []
    for start in range(0, x.shape[0], chunk):
        xs = x[start:start + chunk]
        c = kmeans_pp_init(xs, k, generator=gen, trials=trials).sort(1).values
        c = _lloyd_sorted(xs, c, None if weights is None else weights[start:start + chunk].float(), iters)
        out_c.append(c)
        out_i.append(_nearest(xs, c))
    return torch.cat(out_c), torch.cat(out_i)


def _lloyd_sorted(xs: torch.Tensor, c: torch.Tensor, ws: torch.Tensor | None, iters: int) -> torch.Tensor:
    """Lloyd iterations from sorted centres `c` [g, k]; stops when no run boundary moves. Returns sorted
    centres. Prefix sums are float64 so that a difference of two long sums keeps fp32 precision."""
    xsorted, order = xs.sort(1)
    w = torch.ones_like(xs, dtype=torch.float64) if ws is None else ws.gather(1, order).double()
    zero = torch.zeros(xs.shape[0], 1, dtype=torch.float64)
    cum_w = torch.cat([zero, w.cumsum(1)], 1)  # [g, N + 1]
    cum_wx = torch.cat([zero, (w * xsorted.double()).cumsum(1)], 1)
    n = xs.shape[1]
    edges = None
    for _ in range(iters):
        # a point exactly halfway goes to the lower centre, as argmin's first-index rule would send it
        mids = (c[:, :-1] + c[:, 1:]) / 2
        inner = torch.searchsorted(xsorted, mids.contiguous(), right=True)  # [g, k - 1]
        new = torch.cat([torch.zeros_like(inner[:, :1]), inner, torch.full_like(inner[:, :1], n)], 1)
        if edges is not None and torch.equal(new, edges):
            break
        edges = new
        mass = cum_w.gather(1, edges[:, 1:]) - cum_w.gather(1, edges[:, :-1])
        total = cum_wx.gather(1, edges[:, 1:]) - cum_wx.gather(1, edges[:, :-1])
        c = torch.where(mass > 0, (total / mass.clamp(min=1e-300)).float(), c).sort(1).values
    return c


def _nearest(xs: torch.Tensor, c: torch.Tensor, budget: int = 1 << 24) -> torch.Tensor:
    """Index of each point's nearest centre (the first on a tie), scored directly against every centre so
    that the stored indices agree with the stored table to the last bit. Chunked to ~`budget` floats."""
    g, n = xs.shape
    step = max(1, budget // max(1, n * c.shape[1]))
    return torch.cat([(xs[i:i + step, :, None] - c[i:i + step, None, :]).abs().argmin(-1)
                      for i in range(0, g, step)])


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
