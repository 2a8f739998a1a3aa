"""Word n-gram statistics of datatrove's Gopher repetition rule, on hashes instead of strings.

datatrove builds every n-gram as a Python string (" ".join for the top n-gram, "".join for the
duplicated n-grams) for n = 2..10. Here one text's words are laid out once as a code-point array
and every n-gram is a substring of it; a polynomial hash mod 2**64 of each substring (computed with
prefix sums, all n-grams of one n in a few numpy operations) stands for the string. Equal strings
have equal hashes; a false collision has probability about k**2 / 2**64 for k n-grams.
"""

from __future__ import annotations

import numpy as np

_BASE = 0x9E3779B97F4A7C15 | 1  # odd, so it is invertible mod 2**64
_BASE_INV = pow(_BASE, -1, 1 << 64)


def _compute_powers(base: int, n: int) -> np.ndarray:
    out = np.empty(n, np.uint64)
    if n == 0:
        return out
    out[0] = 1
    if n > 1:
        out[1:] = base
        np.cumprod(out, out=out)  # wraps mod 2**64, which is what we want
    return out


_POWERS: dict[int, np.ndarray] = {}
_MAX_KEPT = 1 << 21  # powers kept per base (16 MiB); a longer text computes its own


def _powers(base: int, n: int) -> np.ndarray:
    """base**0 .. base**(n-1) mod 2**64, read-only. Kept per base and grown by doubling: every text
    needs a prefix of the same sequence, and computing it per text cost ~40% of the n-gram checks."""
    if n > _MAX_KEPT:
        return _compute_powers(base, n)
    table = _POWERS.get(base)
    if table is None or len(table) < n:
        table = _compute_powers(base, min(_MAX_KEPT, max(n, 2 * (len(table) if table is not None else 1 << 16))))
        table.flags.writeable = False
        _POWERS[base] = table
    return table[:n]


class JoinedWords:
    """The words of one text joined by `sep` ("" or " "), ready for substring hashing."""

    def __init__(self, words: list[str], sep: str, lengths: np.ndarray | None = None):
        """`lengths`: the words' lengths, when the caller has them already."""
        self.n_words = len(words)
        if lengths is None:
            lengths = np.fromiter(map(len, words), np.int64, count=len(words))
        step = lengths + len(sep)
        self.starts = np.zeros(len(words) + 1, np.int64)
        np.cumsum(step, out=self.starts[1:])
        self.lengths = lengths
        self.sep_len = len(sep)
        codes = np.frombuffer(sep.join(words).encode("utf-32-le"), np.uint32).astype(np.uint64)
        codes += np.uint64(1)  # so that a NUL character still counts
        with np.errstate(over="ignore"):
            prefix = np.zeros(len(codes) + 1, np.uint64)
            np.cumsum(codes * _powers(_BASE, len(codes)), out=prefix[1:])
        self.prefix = prefix
        self.inv = _powers(_BASE_INV, len(codes) + 1)

    def ngrams(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(hash, character length) of every n-gram, in order; empty when there are < n words."""
        k = self.n_words - n + 1
        if k <= 0:
            return np.zeros(0, np.uint64), np.zeros(0, np.int64)
        begin = self.starts[:k]
        end = self.starts[n:n + k] - self.sep_len  # the last word of the gram has no separator after it
        with np.errstate(over="ignore"):
            h = (self.prefix[end] - self.prefix[begin]) * self.inv[begin]
        # Mix in the length so that strings of different lengths never compare equal.
        h ^= (end - begin).astype(np.uint64) * np.uint64(0xFF51AFD7ED558CCD)
        return h, end - begin

    def span_chars(self, positions: np.ndarray, n: int) -> int:
        """Characters of the n-grams that start at `positions` (sorted; those too close to the end for an
        n-gram are left out)."""
        pos = positions[:np.searchsorted(positions, self.n_words - n + 1)]
        return int((self.starts[pos + n] - self.starts[pos]).sum()) - self.sep_len * len(pos)


def later_occurrences(hashes: np.ndarray) -> np.ndarray:
    """Positions (sorted) whose n-gram occurred at an earlier position. A longer gram that occurred at an
    earlier position begins with this gram, which then occurred there too: every later occurrence of a
    longer gram starts at one of these positions."""
    if len(hashes) < 2:
        return np.zeros(0, np.int64)
    _, first = np.unique(hashes, return_index=True)
    later = np.ones(len(hashes), bool)
    later[first] = False
    return np.flatnonzero(later)


def top_ngram_chars(hashes: np.ndarray, lengths: np.ndarray) -> int:
    """len(most common n-gram) * its count, ties to the first seen (Counter.most_common(1))."""
    uniq, first, counts = np.unique(hashes, return_index=True, return_counts=True)
    top = counts.max()
    i = first[counts == top].min()
    return int(lengths[i]) * int(top)


def duplicated_ngram_chars(hashes: np.ndarray, lengths: np.ndarray, n: int) -> int:
    """Characters of repeated n-grams, scanning left to right and jumping n words past each repeat.

    Only n-grams that occur more than once can be a repeat, so the scan visits just those: an
    n-gram is `seen` when an earlier visited position had it; a repeat skips the next n-1 positions.
    """
    if len(hashes) < 2:
        return 0
    order = np.argsort(hashes)  # ties in any order: both members of an equal pair get marked
    sorted_h = hashes[order]
    same_next = sorted_h[1:] == sorted_h[:-1]
    repeated = np.zeros(len(hashes), bool)
    repeated[order[1:][same_next]] = True
    repeated[order[:-1][same_next]] = True
    candidates = np.flatnonzero(repeated)
    if len(candidates) == 0:
        return 0
    seen: set[int] = set()
    total, next_visit = 0, 0
    h_list = hashes[candidates].tolist()
    for pos, h in zip(candidates.tolist(), h_list):
        if pos < next_visit:
            continue  # jumped over after a repeat: datatrove never looks at it
        if h in seen:
            total += int(lengths[pos])
            next_visit = pos + n
        else:
            seen.add(h)
            next_visit = pos + 1
    return total
