"""Summary consistency scoring throughput on one core, on real news summaries (SummaC's FactCC, SummEval,
XSumFaith, Polytope and the XSum hallucination annotations, ../shared/data/summarization or argv[1]).

Scorers, all given one thread and the same pairs (every k-th pair of every dataset, `--pairs` in all):
- ours: the shipped scorer (`score_summaries(method="nli")`): the entailment model with the shipped
  settings, the lexical first pass (sentences copied word for word, or naming something the document
  lacks, are settled without the model) and the shipped aggregator (fused with the lexical support score);
- ours without the first pass (every summary sentence read by the model);
- the lexical support score alone (the cheap first-pass scorer, the previous default);
- MiniLM sentence alignment (the embedding baseline of `cidermill eval data entailment`).
Each starts cold (no cached document windows or indexes; models loaded outside the timing). Prints
summaries/s (wall and per CPU-second), the ratios, and the load average: on a shared machine the wall
figures move with the load, the CPU-second ones much less. The issue's floor for ours is 50 summaries/s.

    .venv/bin/python benchmarks/summary_entailment.py [summarization folder] [--pairs 300]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from evals.data.entailment import default_data, load_datasets, minilm_alignment  # noqa: E402
from synth.summaries import aggregator, consistency, features  # noqa: E402
from synth.summaries.consistency import ConsistencySettings, sentence_scores  # noqa: E402
from synth.summaries.scoring import score_summaries  # noqa: E402
from synth.summaries.entailment import load_scorer  # noqa: E402
from synth.summaries.nli_model import load_shipped  # noqa: E402


def _timed(fn) -> tuple[float, float]:
    features._document_index.cache_clear()
    consistency._document.cache_clear()
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data", nargs="?", default=str(default_data()))
    ap.add_argument("--pairs", type=int, default=300)
    args = ap.parse_args()
    torch.set_num_threads(1)
    data = load_datasets(args.data)
    total = sum(len(d.labels) for d in data)
    step = max(1, total // args.pairs)
    docs = [x for d in data for x in d.documents[::step]]
    sums = [x for d in data for x in d.summaries[::step]]
    n_words = sum(len(d.split()) for d in docs) / len(docs)
    model = load_shipped()[:2]
    settings = ConsistencySettings(**aggregator.load().info["settings"])
    lexical = load_scorer()
    features.is_specific("warm")  # wordfreq's list loads once per process, outside the timing
    sentence_scores(docs[:2], sums[:2], settings, model=model)  # first-call set-up (tokenizer, kernels)

    counts = {}
    runs = {}
    # the whole shipped scorer: first pass, model, and the lexical support score the fused aggregator reads
    runs["ours (model + lexical first pass)"] = _timed(
        lambda: counts.setdefault("ours", score_summaries(docs, sums, method="nli", model=model).counts))
    no_fp = ConsistencySettings(**{**settings.to_json(), "first_pass": False})
    runs["ours without the first pass"] = _timed(
        lambda: counts.setdefault("no_fp", sentence_scores(docs, sums, no_fp, model=model)[2]))
    runs["lexical support score alone"] = _timed(lambda: lexical.score_pairs(docs, sums))
    n_peer = min(60, len(docs))  # MiniLM embeds every document sentence: time a slice of the same pairs
    wall, cpu = _timed(lambda: minilm_alignment(docs[:n_peer], sums[:n_peer]))
    print(f"pairs: {len(docs)} (every {step}th of {total}; documents {n_words:.0f} words on average), one thread, "
          f"load average {os.getloadavg()[0]:.1f}")
    c = counts["ours"]
    print(f"first pass settled {c['copied'] + c['extrinsic']} of {c['copied'] + c['extrinsic'] + c['model_sentences']} "
          f"summary sentences ({c['copied']} copied, {c['extrinsic']} extrinsic); the model read "
          f"{c['model_pairs']} (window, sentence) pairs, {counts['no_fp']['model_pairs']} without the first pass")
    for name, (wall_s, cpu_s) in runs.items():
        print(f"{name:36s} {len(docs) / wall_s:9.1f} summaries/s wall, {len(docs) / cpu_s:9.1f} per CPU-second")
    print(f"{'MiniLM alignment':36s} {n_peer / wall:9.1f} summaries/s wall, {n_peer / cpu:9.1f} per CPU-second "
          f"(first {n_peer} pairs, model load included)")
    ours_cpu = len(docs) / runs["ours (model + lexical first pass)"][1]
    print(f"ratio ours / MiniLM alignment {ours_cpu / (n_peer / cpu):.1f}x CPU; "
          f"ours / no first pass {runs['ours without the first pass'][1] / runs['ours (model + lexical first pass)'][1]:.1f}x CPU")


if __name__ == "__main__":
    main()
