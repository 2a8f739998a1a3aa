"""MinHash signatures, LSH components and the minhash_dedup_v1 global stage on real C4 documents."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from corpus.dedup.lsh import bucket_edges, components, drop_mask_from_components
from corpus.dedup.minhash import MinHasher, MinHashParams, jaccard_estimate
from corpus.dedup.ngrams import RollingHasher, tokenize
from corpus.executors import run_pipeline
from corpus.pipeline import load_pipeline

from ...conftest import write_jsonl


def shingle_set(text: str, n: int) -> set:
    import re

    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def edit_words(text: str, rate: float, seed: int) -> str:
    rng = random.Random(seed)
    words = text.split(" ")
    return " ".join(w if rng.random() >= rate else f"zq{rng.randrange(10**6)}" for w in words)


def test_tokens_ignore_case_punctuation_and_whitespace():
    t = tokenize(pa.array(["The cat, sat.", "the   CAT sat", None, "", "x"]))
    assert t.lengths.tolist() == [3, 3, 0, 0, 1]
    assert t.hashes[:3].tolist() == t.hashes[3:6].tolist()


def test_tokens_are_the_simplified_words_of_each_text(c4_docs):
    """tokenize() extracts word runs in one pass; its tokens must be word_lists()' (lower-case, runs
    of non-word characters as separators), hashed the same way, non-ASCII letters included."""
    import polars as pl

    from corpus.dedup.ngrams import _TOKEN_SEED, word_lists

    texts = [d["text"] for d in c4_docs[:100]] + [None, "", "  ...  ", "İstanbul \u212a Kelvin café ÉCOLE x_y 12ab", "ÄÖÜ straße ﬁne", "東京 tōkyō"]
    t = tokenize(pa.array(texts))
    words = word_lists(pa.array(texts)).to_pylist()
    assert t.lengths.tolist() == [len(w or []) for w in words]
    flat = [x for w in words for x in (w or [])]
    assert t.hashes.tolist() == pl.Series(flat, dtype=pl.String).hash(seed=_TOKEN_SEED).to_list()


def test_signatures_equal_a_direct_python_reference(c4_docs):
    params = MinHashParams(num_perm=16, ngram=3, seed=7)
    texts = [d["text"][:400] for d in c4_docs[:12]] + ["", "one two"]
    hasher = MinHasher(params, block_shingles=64)  # documents span block boundaries
    sig, has = hasher.signatures(pa.array(texts))
    hashes, doc = RollingHasher(tokenize(pa.array(texts))).shingles(3)
    a, b = (v.tolist() for v in params.coefficients())
    for i in range(len(texts)):
        xs = hashes[doc == i].tolist()
        want = [min(((ak * x + bk) % 2**64) >> 32 for x in xs) if xs else 0xFFFFFFFF for ak, bk in zip(a, b)]
        assert sig[i].tolist() == want and has[i] == bool(xs)


def test_rolling_ngram_hashes_match_direct_hashing():
    t = tokenize(pa.array(["a b c d e f", "c d e", "b c d e f"]))
    h, doc = RollingHasher(t).ngrams(3)
    assert doc.tolist() == [0, 0, 0, 0, 1, 2, 2, 2]
    # "c d e" is the same 3-gram wherever it starts
    assert h[2] == h[4] == h[6]
    assert len(set(h[:4].tolist())) == 4


def test_signature_agreement_estimates_jaccard(c4_docs):
    docs = [d["text"] for d in c4_docs if len(d["text"].split()) > 300][:30]
    edited = [edit_words(d, 0.03, i) for i, d in enumerate(docs)]
    sig, has = MinHasher(MinHashParams(num_perm=256, ngram=5)).signatures(pa.array(docs + edited))
    assert has.all()
    est = jaccard_estimate(sig[:30], sig[30:])
    true = np.array([len(shingle_set(a, 5) & shingle_set(b, 5)) / len(shingle_set(a, 5) | shingle_set(b, 5))
                     for a, b in zip(docs, edited)])
    assert np.abs(est - true).max() < 0.12  # 256 perms: std <= 0.031
    assert abs((est - true).mean()) < 0.02
    unrelated = jaccard_estimate(sig[:29], sig[1:30])
    assert unrelated.max() < 0.05


def test_buckets_and_components_keep_the_smallest_index():
    keys = np.array([7, 3, 7, 9, 3, 7], np.uint64)
    src, dst = bucket_edges(keys, np.arange(6))
    assert sorted(zip(src.tolist(), dst.tolist())) == [(0, 2), (0, 5), (1, 4)]
    labels = components(7, np.r_[src, 5], np.r_[dst, 6])  # 5-6 joins the 0 cluster
    assert drop_mask_from_components(labels).tolist() == [False, False, True, False, True, True, True]


def _pipeline(folder, root, **executor) -> dict:
    return {
        "name": "dedup",
        "input": {"format": "jsonl", "paths": [str(folder / "*.jsonl")]},
        "output": {"root": str(root)},
        "executor": {"kind": "local", "workers": 2, "batch_rows": 64, **executor},
        # a local stage first: a global stage builds from Parquet shards (pass 0 writes them)
        "stages": [{"text_stats_v1": {}}, {"minhash_dedup_v1": {"batch_rows": 50}}],
    }


def _planted_corpus(tmp_path, c4_docs):
    """3 files of real C4 documents; file 2 holds near-copies of documents from files 0 and 1."""
    folder = tmp_path / "in"
    folder.mkdir()
    docs = [d["text"] for d in c4_docs if len(d["text"].split()) >= 150][:120]
    write_jsonl(folder / "a.jsonl", [{"text": t} for t in docs[:60]])
    write_jsonl(folder / "b.jsonl", [{"text": t} for t in docs[60:]])
    planted = [
        {"text": edit_words(docs[3], 0.01, 1)},  # ~1% words replaced
        {"text": docs[70].upper().replace(".", " !")},  # case/punctuation only
        {"text": docs[10] + " Click here to subscribe."},  # boilerplate appended
        {"text": edit_words(docs[10], 0.01, 2)},  # a second copy of docs[10]: same cluster
        {"text": edit_words(docs[20], 0.5, 3)},  # half the words changed: not a near-duplicate
    ]
    write_jsonl(folder / "c.jsonl", planted)
    return folder


def test_minhash_dedup_drops_planted_near_duplicates_and_keeps_the_first(tmp_path, c4_docs):
    folder = _planted_corpus(tmp_path, c4_docs)
    out = run_pipeline(load_pipeline(_pipeline(folder, tmp_path / "root")), progress=False)
    stats = {s.name: s for s in out.stats}["minhash_dedup_v1"]
    assert stats.dropped == {"near_duplicate": 4}
    rejects = out.rejects.read().to_pylist()
    assert sorted(r["source"] for r in rejects) == ["c.jsonl#L1", "c.jsonl#L2", "c.jsonl#L3", "c.jsonl#L4"]
    assert {r["drop_reason"] for r in rejects} == {"near_duplicate"}
    kept = set(out.version.read(columns=["source"]).column("source").to_pylist())
    assert {"a.jsonl#L4", "a.jsonl#L11", "b.jsonl#L11", "c.jsonl#L5"} <= kept


@pytest.mark.slow
def test_minhash_dedup_local_and_ray_keep_the_same_ids(tmp_path, c4_docs):
    pytest.importorskip("ray")
    folder = _planted_corpus(tmp_path, c4_docs)
    local = run_pipeline(load_pipeline(_pipeline(folder, tmp_path / "l")), progress=False)
    ray = run_pipeline(load_pipeline(_pipeline(folder, tmp_path / "r", kind="ray")), progress=False)
    ids = lambda v: v.read(columns=["id"]).column("id").to_pylist()  # noqa: E731
    assert ids(local.version) == ids(ray.version)
    assert local.version.version_id == ray.version.version_id
    assert {s.name: s for s in ray.stats}["minhash_dedup_v1"].dropped == {"near_duplicate": 4}
