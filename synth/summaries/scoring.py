"""One entry point for scoring summaries with either shipped method, and that method's threshold.

`nli`: the entailment cross-encoder read the SummaC way (consistency.py) and the shipped aggregator
(aggregator.py, consistency_model.json, which also fixes the scorer's settings). `support`: the
lexical support score (entailment.py, entailment_model.json). The stage, the threshold command and the
evaluation all score through here, so they agree.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

METHODS = ("nli", "support")


@dataclass
class Scored:
    score: np.ndarray
    threshold: float
    per_sentence: list[np.ndarray] = field(default_factory=list)  # nli only
    by_model: list[np.ndarray] = field(default_factory=list)  # nli only: which sentences the model read
    counts: Counter = field(default_factory=Counter)


def shipped_threshold(method: str) -> float:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    if method == "support":
        from synth.summaries.entailment import load_scorer

        return load_scorer().threshold
    from synth.summaries import aggregator

    return aggregator.load().threshold


def score_summaries(documents: list[str], summaries: list[str], *, method: str = "nli", model=None,
                    support: np.ndarray | None = None) -> Scored:
    """Scores of (document, summary) pairs by `method`; `model` = (cross-encoder, tokenizer) to use instead
    of the shipped one; `support` = the pairs' lexical support scores when the caller has them already."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    from synth.summaries.entailment import load_scorer

    if method == "support":
        scorer = load_scorer()
        return Scored(scorer.score_pairs(documents, summaries), scorer.threshold)
    from synth.summaries import aggregator
    from synth.summaries.consistency import ConsistencySettings, sentence_scores

    agg = aggregator.load()
    per_sentence, by_model, counts = sentence_scores(documents, summaries, ConsistencySettings(**agg.info["settings"]),
                                                     model=model)
    if agg.needs_support and support is None:
        support = load_scorer().score_pairs(documents, summaries)
    return Scored(agg.score(per_sentence, support), agg.threshold, per_sentence, by_model, counts)
