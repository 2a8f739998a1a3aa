"""Summary consistency with the entailment cross-encoder, scored the way SummaC does.

The document is cut into windows of `window_sentences` consecutive sentences (stride one sentence),
the summary into sentences. Each summary sentence gets its best-supported window: the highest
entailment probability over the windows the model reads. The summary's score aggregates those
per-sentence scores: the zero-shot mean or minimum, or a small learned aggregator over their
histogram (aggregator.py).

The model does not read every window: a news document has 20-40 sentences, and one pair costs
several milliseconds on a CPU core. The `candidates` windows sharing most content words with the
sentence (specific words count double) are the ones where support can be; the rest are skipped. One
candidate is the default: held out it scores as well as three (docs/synth.md) at a third of the model
calls.

A lexical first pass settles some sentences with no model call (`first_pass`):
- a sentence the document contains word for word is supported (score 1.0), as the model would say;
- a sentence with a specific word the document lacks (a number, a rare word, a capitalised name:
  features.extrinsic_words) is unsupported (score 0.0). On SummaC's sets 95-100% of summaries with
  such a word are labelled inconsistent (SummEval: 67% of 12).
Each decision is counted by kind, so a caller can report how much the first pass settled.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from synth.summaries.features import _STOP, extrinsic_words, is_specific, sentences, tokens


@dataclass(frozen=True, kw_only=True)
class ConsistencySettings:
    window_sentences: int = 2
    candidates: int = 1
    first_pass: bool = True
    max_length: int = 160  # tokens of one (window, sentence) pair; the window is cut first
    batch_size: int = 32

    def __post_init__(self):
        if self.window_sentences < 1 or self.candidates < 1 or self.max_length < 32:
            raise ValueError(f"window_sentences and candidates must be >= 1 and max_length >= 32; got {self}")

    def to_json(self) -> dict:
        return {"window_sentences": self.window_sentences, "candidates": self.candidates,
                "first_pass": self.first_pass, "max_length": self.max_length}


def _norm(text: str) -> str:
    return " " + " ".join(tokens(text)) + " "


def summary_sentences(summary: str) -> list[str]:
    return [s.strip() for s in sentences(summary) if tokens(s)] or [summary.strip()]


@lru_cache(maxsize=256)
def _document(document: str, window_sentences: int):
    """(windows, the content-word set of each window, the normalised whole text), once per document."""
    sents = [s.strip() for s in sentences(document) if s.strip()] or [document.strip()]
    n = max(1, len(sents) - window_sentences + 1)
    windows = [" ".join(sents[i:i + window_sentences]) for i in range(n)]
    words = [{t for t in tokens(w) if t not in _STOP} for w in windows]
    return windows, words, _norm(document)


def candidate_windows(document: str, sentence: str, settings: ConsistencySettings) -> list[int]:
    """Indices of the windows sharing most content words with `sentence` (specific words count
    double; ties go to the earlier window)."""
    _, words, _ = _document(document, settings.window_sentences)
    content = {t for t in tokens(sentence) if t not in _STOP}
    weight = {t: 2.0 if is_specific(t) else 1.0 for t in content}
    overlap = [sum(weight[t] for t in content & w) for w in words]
    order = sorted(range(len(words)), key=lambda i: (-overlap[i], i))
    return order[:settings.candidates]


_COPY_MIN_WORDS = 4  # a shorter "sentence" (a heading, a name) is not taken as proof of support


def first_pass(document: str, sentence: str) -> tuple[float, str] | None:
    """(score, kind) when the sentence is settled without the model, else None."""
    _, _, text = _document(document, 1)
    norm = _norm(sentence)
    if len(norm.split()) >= _COPY_MIN_WORDS and norm in text:
        return 1.0, "copied"
    if extrinsic_words(document, sentence):
        return 0.0, "extrinsic"
    return None


def sentence_scores(documents: list[str], summaries: list[str], settings: ConsistencySettings = ConsistencySettings(),
                    *, model=None) -> tuple[list[np.ndarray], list[np.ndarray], Counter]:
    """Per summary, the best-window entailment probability of each of its sentences and whether the model
    read it (False: the first pass settled it); and counters: sentences settled by the first pass
    (`copied`, `extrinsic`), sentences and distinct pairs read by the model.

    `model` is (cross-encoder, tokenizer) or None for the shipped one (nli_model.load_shipped)."""
    from synth.summaries.nli_model import bf16_supported, load_shipped, predict_logits

    counts: Counter = Counter()
    out: list[np.ndarray] = []
    by_model: list[np.ndarray] = []
    pair_index: dict[tuple[str, str], int] = {}
    pending: list[tuple[int, int, list[int]]] = []  # (summary, sentence, pair ids)
    for i, (doc, summ) in enumerate(zip(documents, summaries)):
        sents = summary_sentences(summ)
        out.append(np.zeros(len(sents)))
        by_model.append(np.zeros(len(sents), dtype=bool))
        windows, _, _ = _document(doc, settings.window_sentences)
        for j, sent in enumerate(sents):
            settled = first_pass(doc, sent) if settings.first_pass else None
            if settled is not None:
                out[i][j] = settled[0]
                counts[settled[1]] += 1
                continue
            ids = [pair_index.setdefault((windows[w], sent), len(pair_index))
                   for w in candidate_windows(doc, sent, settings)]
            pending.append((i, j, ids))
            by_model[i][j] = True
            counts["model_sentences"] += 1
    counts["model_pairs"] = len(pair_index)
    if pair_index:
        net, tok = model if model is not None else load_shipped()[:2]
        counts["model_bf16"] = int(bf16_supported())  # the precision shows in the stats (scores differ ~1e-2)
        pairs = list(pair_index)
        logits = predict_logits(net, tok, [p for p, _ in pairs], [h for _, h in pairs],
                                batch_size=settings.batch_size, max_length=settings.max_length)
        prob = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
        for i, j, ids in pending:
            out[i][j] = float(prob[ids].max())
    return out, by_model, counts

