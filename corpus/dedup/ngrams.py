"""Word tokens and n-gram hashes for a whole batch of documents at once (numpy, no per-word Python).

Text is simplified the same way for every consumer (fuzzy dedup, decontamination): lowercased,
every run of non-word characters becomes one space, so case, punctuation and whitespace changes do
not change the tokens. Tokens are hashed with polars' vectorised 64-bit hash (seeded, stable within
one installed polars version: signatures are compared only within one build).

n-gram hashes use a rolling trick so any n costs two vector operations: with S the prefix sum of
h[t] * W**t (mod 2**64, numpy wraps), S[i+n] - S[i] = W**i * sum_j h[i+j] * W**j, and W is odd so
W**-i exists mod 2**64. The result is an order-sensitive polynomial hash of the n token hashes,
finished with a 64-bit mixer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

_W = np.uint64(0x9E3779B97F4A7C15)  # odd, so invertible mod 2**64
_W_INV = np.uint64(pow(int(_W), -1, 2**64))
_TOKEN_SEED = 0x5EED


@dataclass
class Tokens:
    """Token hashes of a batch, flattened: doc i owns hashes[offsets[i]:offsets[i+1]]."""

    hashes: np.ndarray  # uint64, (n_tokens,)
    offsets: np.ndarray  # int64, (n_docs + 1,)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


def simplify(text: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray:
    """Lowercase; runs of non-word characters (punctuation, whitespace) -> one space. Nulls -> ''."""
    text = pc.fill_null(text, "")
    return pc.utf8_trim_whitespace(pc.replace_substring_regex(pc.utf8_lower(text), r"[^\w]+", " "))


def word_lists(text: pa.ChunkedArray | pa.Array) -> pa.ListArray:
    simple = simplify(text)
    # "" would split into one empty token; a null splits into no list at all
    simple = pc.if_else(pc.equal(pc.utf8_length(simple), 0), pa.scalar(None, pa.string()), simple)
    words = pc.utf8_split_whitespace(simple)
    if isinstance(words, pa.ChunkedArray):
        words = words.combine_chunks() if words.num_chunks != 1 else words.chunk(0)
    return words


# `simplify` + split in one pass: after lower-casing, the words are the runs of RE2's (ASCII) \w.
_WORD_RUN = r"[0-9a-z_]+"


def tokenize(text: pa.ChunkedArray | pa.Array) -> Tokens:
    """Token hashes of `word_lists(text)`, without building the simplified text: polars extracts
    the runs of word characters from the lower-cased text directly (the same tokens, fewer passes)."""
    lowered = pc.utf8_lower(pc.fill_null(text, ""))
    if isinstance(lowered, pa.ChunkedArray):
        lowered = lowered.combine_chunks() if lowered.num_chunks != 1 else lowered.chunk(0)
    lists = pl.Series(lowered).str.extract_all(_WORD_RUN)
    lengths = lists.list.len().fill_null(0).to_numpy().astype(np.int64, copy=False)
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1]:
        flat = lists.explode().drop_nulls()
        hashes = flat.hash(seed=_TOKEN_SEED).to_numpy().astype(np.uint64, copy=False)
    else:
        hashes = np.zeros(0, np.uint64)
    return Tokens(hashes, offsets)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: spreads every input bit over the output (in place on a copy)."""
    x = x.copy()
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def _powers(base: np.uint64, n: int) -> np.ndarray:
    """base**0 .. base**(n-1) mod 2**64 (cumprod wraps like the hashes do)."""
    out = np.full(n, base, np.uint64)
    if n:
        out[0] = 1
        np.cumprod(out, out=out)
    return out


class RollingHasher:
    """All n-gram hashes of a token batch, for any n, from one prefix sum."""

    def __init__(self, tokens: Tokens):
        self.tokens = tokens
        n = len(tokens.hashes)
        self._pow = _powers(_W, n + 1)
        self._inv = _powers(_W_INV, n + 1)
        prefix = np.zeros(n + 1, np.uint64)
        np.cumsum(tokens.hashes * self._pow[:n], out=prefix[1:])
        self._prefix = prefix

    def starts(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Flat start positions of every n-gram that fits inside its document, and its doc index."""
        lengths = self.tokens.lengths
        counts = np.maximum(lengths - n + 1, 0)
        doc = np.repeat(np.arange(len(lengths)), counts)
        first = np.repeat(self.tokens.offsets[:-1] - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
        return np.arange(len(doc), dtype=np.int64) + first, doc

    def hash_at(self, starts: np.ndarray, n: int) -> np.ndarray:
        raw = (self._prefix[starts + n] - self._prefix[starts]) * self._inv[starts]
        return mix64(raw ^ np.uint64(n))

    def ngrams(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(hashes, doc index) of every n-gram; docs shorter than n have none."""
        starts, doc = self.starts(n)
        return self.hash_at(starts, n), doc

    def shingles(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Like `ngrams`, but a doc with 1..n-1 tokens gets one shingle of all its tokens, so short
        documents still have a signature."""
        hashes, doc = self.ngrams(n)
        lengths = self.tokens.lengths
        short = np.nonzero((lengths > 0) & (lengths < n))[0]
        if len(short):
            starts = self.tokens.offsets[short]
            raw = (self._prefix[starts + lengths[short]] - self._prefix[starts]) * self._inv[starts]
            extra = mix64(raw ^ np.uint64(n))
            hashes = np.concatenate([hashes, extra])
            doc = np.concatenate([doc, short])
            order = np.argsort(doc, kind="stable")
            hashes, doc = hashes[order], doc[order]
        return hashes, doc
