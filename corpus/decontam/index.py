"""The benchmark n-gram index and the collision search over documents.

Every segment of every benchmark item is tokenised exactly like documents are (lowercase, punctuation
and whitespace folded: corpus/dedup/ngrams.py), so case and whitespace edits do not hide an item.
A segment of L tokens contributes its n-grams for n = min(L, max_n); a segment shorter than min_n is
not indexed (too short to say anything). So long items are found by any shared max_n-gram, short
ones (a TriviaQA question) only whole.

The index is a few sorted arrays per n (hash, segment, start), saved as one `.npz`; lookups are
`np.searchsorted` of a batch's n-gram hashes, with no Python per document.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from manifests.storage import Location

from ..dedup.ngrams import RollingHasher, Tokens, tokenize, word_lists
from ..dedup.spill import as_location, require
from .benchmarks import Item


def _unique_first(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique values and the smallest original index of each (np.unique's return_index
    needs a stable sort, ~3x slower than this)."""
    order = np.argsort(h)
    sh = h[order]
    starts = np.flatnonzero(np.r_[True, sh[1:] != sh[:-1]])
    return sh[starts], np.minimum.reduceat(order, starts)


@dataclass
class NgramIndex:
    ns: np.ndarray  # distinct n values, (k,)
    hashes: list[np.ndarray]  # per n: sorted uint64 n-gram hashes
    segment: list[np.ndarray]  # per n: segment index of each hash (first occurrence)
    start: list[np.ndarray]  # per n: token position of the n-gram in its segment
    seg_item: np.ndarray  # per segment: item index
    item_benchmark: np.ndarray  # per item: benchmark index
    item_ids: list[str]
    benchmarks: list[str]
    segments: list[str]  # segment texts, to show the matched n-gram
    _bitmap: np.ndarray | None = None

    BITMAP_BITS = 1 << 27  # 16 MiB: ~2% false positives at 2M indexed n-grams

    def bitmap(self) -> np.ndarray:
        """One bit per high-bits bucket of any indexed hash: a cache-friendly first test, so only
        the few candidates go through the binary search."""
        if self._bitmap is None:
            bm = np.zeros(self.BITMAP_BITS // 8, np.uint8)
            for h in self.hashes:
                b = (h >> np.uint64(64 - 27)).astype(np.int64)
                np.bitwise_or.at(bm, b >> 3, (1 << (b & 7)).astype(np.uint8))
            self._bitmap = bm
        return self._bitmap

    @classmethod
    def build(cls, items: dict[str, list[Item]], *, min_n: int, max_n: int) -> "NgramIndex":
        benchmarks = list(items)
        item_ids, item_bench, seg_texts, seg_item = [], [], [], []
        for b, name in enumerate(benchmarks):
            for it in items[name]:
                segs = list(it.segments)
                if len(segs) > 1 and max(len(s.split()) for s in segs) < max_n:
                    # an item made only of short fields (question + choices) is also indexed whole,
                    # so a copy of the entire item is found even if no field alone is long enough
                    segs.append("\n".join(segs))
                for s in segs:
                    seg_texts.append(s)
                    seg_item.append(len(item_ids))
                item_ids.append(it.item_id)
                item_bench.append(b)
        tokens = tokenize(pa.array(seg_texts, pa.string()))
        roll = RollingHasher(tokens)
        lengths = tokens.lengths
        per_n: dict[int, tuple[list, list, list]] = {}
        # long segments: every max_n-gram
        starts, seg = roll.starts(max_n)
        if len(starts):
            per_n[max_n] = ([roll.hash_at(starts, max_n)], [seg], [starts - tokens.offsets[seg]])
        # short segments: the whole segment as one n-gram, n = its length
        short = np.flatnonzero((lengths >= min_n) & (lengths < max_n))
        for n in np.unique(lengths[short]).tolist():
            segs = short[lengths[short] == n]
            h = roll.hash_at(tokens.offsets[segs], n)
            per_n.setdefault(n, ([], [], []))
            per_n[n][0].append(h)
            per_n[n][1].append(segs)
            per_n[n][2].append(np.zeros(len(segs), np.int64))
        ns, hashes, segment, start = [], [], [], []
        for n in sorted(per_n):
            h = np.concatenate(per_n[n][0])
            s = np.concatenate(per_n[n][1])
            p = np.concatenate(per_n[n][2])
            uniq, first = _unique_first(h)
            ns.append(n)
            hashes.append(uniq)
            segment.append(s[first].astype(np.int64))
            start.append(p[first].astype(np.int64))
        return cls(np.array(ns, np.int64), hashes, segment, start, np.array(seg_item, np.int64),
                   np.array(item_bench, np.int64), item_ids, benchmarks, seg_texts)

    @property
    def n_ngrams(self) -> int:
        return sum(len(h) for h in self.hashes)

    # ---- persistence: one npz (arrays), on the storage filesystem ------------------------
    def to_bytes(self) -> bytes:
        """The index as one `.npz` (what `save` writes and `from_bytes` reads)."""
        arrays = {"ns": self.ns, "seg_item": self.seg_item, "item_benchmark": self.item_benchmark,
                  "item_ids": np.array(self.item_ids, dtype=object), "benchmarks": np.array(self.benchmarks),
                  "segments": np.array(self.segments, dtype=object)}
        for k, n in enumerate(self.ns.tolist()):
            arrays[f"h{n}"], arrays[f"s{n}"], arrays[f"p{n}"] = self.hashes[k], self.segment[k], self.start[k]
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> "NgramIndex":
        z = np.load(io.BytesIO(data), allow_pickle=True)  # our own file, written by to_bytes()
        ns = z["ns"]
        return cls(ns, [z[f"h{n}"] for n in ns.tolist()], [z[f"s{n}"] for n in ns.tolist()],
                   [z[f"p{n}"] for n in ns.tolist()], z["seg_item"], z["item_benchmark"],
                   z["item_ids"].tolist(), z["benchmarks"].tolist(), z["segments"].tolist())

    def save(self, where, data: bytes | None = None) -> "Location":
        """Write the index (or `data`, its `to_bytes()` already made) to `where` (a storage Location or a
        path/URI); one atomic write."""
        loc = as_location(where)
        loc.write_bytes_atomic(self.to_bytes() if data is None else data)
        return loc

    @classmethod
    def load(cls, where) -> "NgramIndex":
        loc = as_location(where)
        require(loc, "decontaminate_v1 index")
        return cls.from_bytes(loc.read_bytes())

    # ---- search --------------------------------------------------------------------------
    def find(self, tokens: Tokens) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every (doc, n value index, position in that n's table) where a document n-gram is in the
        index, unique per (doc, n-gram)."""
        roll = RollingHasher(tokens)
        bitmap = self.bitmap()
        docs, ks, pos = [], [], []
        for k, n in enumerate(self.ns.tolist()):
            h, doc = roll.ngrams(n)
            b = (h >> np.uint64(64 - 27)).astype(np.int64)
            maybe = (bitmap[b >> 3] >> (b & 7).astype(np.uint8)) & 1 == 1
            h, doc = h[maybe], doc[maybe]
            if not len(h):
                continue
            table = self.hashes[k]
            at = np.searchsorted(table, h)
            at[at == len(table)] = 0
            hit = table[at] == h
            if hit.any():
                pairs = np.unique(np.stack([doc[hit], at[hit]], axis=1), axis=0)
                docs.append(pairs[:, 0])
                pos.append(pairs[:, 1])
                ks.append(np.full(len(pairs), k, np.int64))
        if not docs:
            z = np.zeros(0, np.int64)
            return z, z, z
        return np.concatenate(docs), np.concatenate(ks), np.concatenate(pos)

    def key(self, k: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """A global id for an indexed n-gram: (n value index, table position) packed in int64."""
        return (k.astype(np.int64) << 40) | pos.astype(np.int64)

    def describe(self, key: int) -> dict:
        """Benchmark, item id and the n-gram's words for a packed key."""
        k, pos = key >> 40, key & ((1 << 40) - 1)
        n = int(self.ns[k])
        seg = int(self.segment[k][pos])
        start = int(self.start[k][pos])
        words = word_lists(pa.array([self.segments[seg]])).to_pylist()[0] or []
        item = int(self.seg_item[seg])
        return {"benchmark": self.benchmarks[int(self.item_benchmark[item])], "item": self.item_ids[item],
                "ngram": " ".join(words[start:start + n]), "n": n}
