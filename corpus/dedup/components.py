"""Connected components on the workers: alternating large-star / small-star contraction over
hash-partitioned edge lists (Kiveris, Lattanzi, Mirrokni, Rastogi, Vassilvitskii, "Connected
Components in MapReduce and Beyond", SoCC 2014), one `TaskMap.map` per step.

Nodes are int64 (packed (shard, row), so smaller = earlier in (shard, row) order). Each step reads
the edges addressed to its partition from every writer and writes its output edges to the
partition of the node that the next step groups by, all on the storage filesystem:

- large-star (grouped by u, both directions of every edge): m = min(u, neighbours); every
  neighbour v > u is linked to m instead. It also reports whether the graph it read is already a
  forest of stars centred at each component's minimum (every node is either smaller than all its
  neighbours, or has exactly one, smaller, neighbour); when every partition says so, the leaves of
  those stars, with their centres, are the answer.
- small-star (grouped by the larger end u of each edge): m = min(u, smaller neighbours); u and
  every smaller neighbour are linked to m.

Both steps keep components intact and converge in O(log^2 n) rounds (the paper's bound; a few rounds
for dedup clusters). The driver only adds up counts. Memory per task: its partition's edges.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from manifests.errors import FatalError
from manifests.storage import Location

from .spill import load_arrays, partition_of, save_arrays, split_by_partition

MAX_ROUNDS = 200


def _file(ccdir: Location, step: str, r: int, dst: int, src: int) -> Location:
    return ccdir.join(f"{step}-{r:03d}", f"{dst:04d}-{src:04d}.npz")


def _unique_pairs(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (u, v) pairs, sorted by u then v."""
    order = np.lexsort((v, u))
    u, v = u[order], v[order]
    keep = np.r_[True, (u[1:] != u[:-1]) | (v[1:] != v[:-1])] if len(u) else np.zeros(0, bool)
    return u[keep], v[keep]


def _groups(u: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.r_[True, u[1:] != u[:-1]]) if len(u) else np.zeros(0, np.int64)


def write_edges(ccdir: Location, step: str, r: int, src: int, u: np.ndarray, v: np.ndarray, parts: int,
                *, both_directions: bool) -> None:
    """Address edges (u, v) to the partition of u (and (v, u) to that of v) for the next step."""
    if both_directions:
        u, v = np.concatenate([u, v]), np.concatenate([v, u])
    for dst, sel in enumerate(split_by_partition(partition_of(u, parts), parts)):
        save_arrays(_file(ccdir, step, r, dst, src), u=u[sel], v=v[sel])


def _read(ccdir: Location, step: str, r: int, dst: int, parts: int) -> tuple[np.ndarray, np.ndarray]:
    arrays = [load_arrays(_file(ccdir, step, r, dst, s), "connected components") for s in range(parts)]
    u = np.concatenate([a["u"] for a in arrays]).astype(np.int64)
    v = np.concatenate([a["v"] for a in arrays]).astype(np.int64)
    return u, v


def large_star(p: int, *, ccdir: Location, r: int, parts: int) -> int:
    """One partition's large-star; returns how many of its nodes are not yet star-shaped."""
    u, v = _read(ccdir, "ls", r, p, parts)
    loop = u == v
    u, v = _unique_pairs(u[~loop], v[~loop])
    starts = _groups(u)
    nodes = u[starts]
    min_nbr = np.minimum.reduceat(v, starts) if len(u) else np.zeros(0, np.int64)
    degree = np.diff(np.r_[starts, len(u)])
    centre_ok = min_nbr > nodes
    leaf_ok = (degree == 1) & (min_nbr < nodes)
    # valid as the answer only if every partition reports a star forest (the driver checks)
    save_arrays(ccdir.join(f"leaves-{r:03d}", f"{p:04d}.npz"), node=nodes[leaf_ok], root=min_nbr[leaf_ok])
    m = np.minimum(nodes, min_nbr)
    m_of_edge = np.repeat(m, degree)
    up = v > u
    write_edges(ccdir, "ss", r, p, v[up], m_of_edge[up], parts, both_directions=False)
    return int((~(centre_ok | leaf_ok)).sum())


def small_star(p: int, *, ccdir: Location, r: int, parts: int) -> int:
    """One partition's small-star (edges (u, v) with v < u, grouped by u); returns edges written."""
    u, v = _read(ccdir, "ss", r, p, parts)
    u, v = _unique_pairs(u, v)
    starts = _groups(u)
    nodes = u[starts]
    m = np.minimum.reduceat(v, starts) if len(u) else np.zeros(0, np.int64)
    m_of_edge = np.repeat(m, np.diff(np.r_[starts, len(u)]))
    a = np.concatenate([v, nodes])
    b = np.concatenate([m_of_edge, m])
    keep = a != b
    a, b = _unique_pairs(a[keep], b[keep])
    write_edges(ccdir, "ls", r + 1, p, a, b, parts, both_directions=True)
    return len(a)


def star_components(tasks, ccdir: Location, parts: int) -> tuple[list[Location], int]:
    """Run the rounds over edges already written for large-star round 0 (`write_edges(ccdir, "ls", 0,
    ...)` by every one of `parts` writers). Returns the leaf files -- (node, root) with root the
    smallest node of the component, for every node that is not its component's smallest -- and the
    number of rounds."""
    for r in range(MAX_ROUNDS):
        not_star = sum(tasks.map(partial(large_star, ccdir=ccdir, r=r, parts=parts), range(parts)))
        if not_star == 0:
            return [ccdir.join(f"leaves-{r:03d}", f"{p:04d}.npz") for p in range(parts)], r + 1
        tasks.map(partial(small_star, ccdir=ccdir, r=r, parts=parts), range(parts))
    raise FatalError(f"connected components did not converge in {MAX_ROUNDS} rounds under {ccdir.uri}")
