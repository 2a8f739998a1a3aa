"""Decontamination throughput with every benchmark loaded: ours vs datatrove's n-gram filter.

Same real documents (bundled C4 sample + the Wikipedia sample), same benchmark items (every reader
in corpus/decontam/benchmarks.py: 16 benchmarks, ~42k items), one thread, one process per method:

- ours: NgramIndex.build (every segment's 13-grams, short segments whole) + `find` over batches of
  1,024 documents, i.e. the per-shard work of decontaminate_v1's build pass;
- datatrove 0.10.1: the hashes NGramsDecontIndexer.compute_hashes makes (its indexer class needs
  lighteval, not installed; the same three calls are made directly) over the same segments
  (13-grams) into the filter's in-memory dict, then NGramsDecontFilter.filter per document (its spaCy word tokenizer, one xxhash
  per n-gram, a dict lookup). Its xxhash call gets bytes (xxhash 4.1 rejects str).

Reported: index build seconds, docs/s (CPU seconds, so per core), peak memory of each.

    .venv/bin/python benchmarks/decontam_ngrams.py
"""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
os.environ.setdefault("POLARS_MAX_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
N = 13


def all_items():
    from corpus.decontam.benchmarks import DEFAULT_BENCHMARKS, benchmarks_dir, load_items

    return {name: load_items(name, benchmarks_dir()) for name in DEFAULT_BENCHMARKS}


def ours(docs, items):
    import pyarrow as pa

    from corpus.decontam.index import NgramIndex
    from corpus.dedup.ngrams import tokenize

    t0 = time.process_time()
    index = NgramIndex.build(items, min_n=8, max_n=N)
    index.bitmap()
    build = time.process_time() - t0
    arr = pa.array(docs)
    t1 = time.process_time()
    hits = 0
    for k in range(0, len(arr), 1024):
        doc, _, _ = index.find(tokenize(arr.slice(k, 1024)))
        hits += len(set(doc.tolist()))
    return build, time.process_time() - t1, hits


def datatrove(docs, items):
    import xxhash
    from datatrove.data import Document
    from datatrove.pipeline.decont import NGramsDecontConfig, NGramsDecontFilter
    from datatrove.utils.text import ngrams, simplify_text

    cfg = NGramsDecontConfig(n_grams=N)
    xx = xxhash.xxh64_intdigest if cfg.hash_config.precision == 64 else xxhash.xxh32_intdigest
    hash_bytes = lambda s: xx(s.encode())  # noqa: E731  (the str -> bytes workaround)
    t0 = time.process_time()
    flt = NGramsDecontFilter("/tmp/unused-decont-index", config=cfg)
    # NGramsDecontIndexer needs lighteval (not installed here); its compute_hashes for a label is
    # exactly this: the filter's word tokenizer over simplify_text, n-grams, one hash each
    table = {}
    for name, its in items.items():
        for it in its:
            for seg in it.segments:
                words = flt.tokenizer.word_tokenize(simplify_text(seg, cfg.norm_config))
                for gram in ngrams(words, N):
                    table.setdefault(hash_bytes(" ".join(gram)), name)
    flt.hash_func = hash_bytes
    flt._index_hashes = table
    build = time.process_time() - t0
    t1 = time.process_time()
    hits = 0
    for i, d in enumerate(docs):
        res = flt.filter(Document(text=d, id=str(i)))
        hits += res is not True
    return build, time.process_time() - t1, hits


METHODS = {"ours (decontaminate_v1 index + find)": ours, "datatrove NGramsDecontFilter": datatrove}


def _run(name, docs, q):
    try:
        _measure(name, docs, q)
    except BaseException as exc:  # say why instead of leaving the parent waiting
        q.put(exc)
        raise


def _measure(name, docs, q):
    items = all_items()
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    build, seconds, hits = METHODS[name](docs, items)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    q.put((build, seconds, hits, (peak - base) / 1024, sum(len(v) for v in items.values())))


def main() -> int:
    from dedup_minhash import documents

    docs = documents(1)
    print(f"{len(docs)} real documents (x10 for ours), every benchmark loaded; CPU seconds, one thread")
    ctx = mp.get_context("spawn")
    rates = {}
    for name in METHODS:
        batch = docs * (10 if name.startswith("ours") else 1)
        q = ctx.Queue()
        p = ctx.Process(target=_run, args=(name, batch, q))
        p.start()
        got = q.get()
        if isinstance(got, BaseException):
            raise SystemExit(f"{name} failed: {got!r}")
        build, seconds, hits, peak, n_items = got
        p.join()
        rates[name] = len(batch) / seconds
        print(f"  {name:38s} index {build:5.1f} s ({n_items} items)  {rates[name]:8.0f} docs/s  "
              f"contaminated {hits}  peak +{peak:6.0f} MB", flush=True)
    a, b = rates.values()
    print(f"ratio ours / datatrove: {a / b:.1f}x docs/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
