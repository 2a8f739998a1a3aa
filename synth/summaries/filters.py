"""The entailment score and filter for summaries (score, then decide).

`EntailmentScore` adds `entail__score` (probability the summary is consistent with its payload,
from the scorer trained on SummaC; see entailment.py); `EntailmentFilter` drops rows below the
threshold calibrated there (or one given) as `not_entailed`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from corpus.config import require
from corpus.registry import register
from corpus.stage import Filter, Scorer

from .entailment import load_scorer
from .features import feature_matrix


@dataclass(frozen=True, kw_only=True)
class EntailmentScoreConfig:
    payload_field: str = "payload"
    summary_field: str = "summary"


@register
class EntailmentScore(Scorer):
    name = "summary_entailment_score_v1"
    Config = EntailmentScoreConfig

    def score(self, table: pa.Table) -> dict[str, pa.Array]:
        c = self.config
        docs, sums = table.column(c.payload_field).to_pylist(), table.column(c.summary_field).to_pylist()
        if not docs:
            return {"entail__score": pa.array([], pa.float64())}
        return {"entail__score": pa.array(load_scorer().score(feature_matrix(docs, sums)), pa.float64())}


@dataclass(frozen=True, kw_only=True)
class EntailmentFilterConfig:
    threshold: float | None = None  # None = the threshold calibrated on SummaC with the model

    def __post_init__(self):
        require(self.threshold is None or 0.0 <= self.threshold <= 1.0, f"threshold must be in [0, 1]; got {self.threshold}")


@register
class EntailmentFilter(Filter):
    name = "summary_entailment_filter_v1"
    Config = EntailmentFilterConfig

    def reasons(self, table: pa.Table) -> pa.Array:
        t = self.config.threshold if self.config.threshold is not None else load_scorer().threshold
        low = pc.less(table.column("entail__score"), t)
        return pc.if_else(pc.fill_null(low, True), pa.scalar("not_entailed"), pa.scalar(None, pa.string()))
