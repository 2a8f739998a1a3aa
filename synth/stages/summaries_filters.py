"""The entailment score and filter for summaries (score, then decide).

`EntailmentScore` adds `entail__score`, the support score of the summary against its payload (see
entailment.py; calibrated on news summaries: payloads such as emails, messages and notifications are
another domain, so check the threshold on your own data). With `llm_judge: {backend: {...}}` it also
adds `entail__llm_score` (the share of summary sentences an LLM says the payload supports) and
`entail__score` becomes the mean of the two. `EntailmentFilter` drops rows below the calibrated
threshold (or one given) as `not_entailed`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from manifests.config import require
from corpus.registry import register
from corpus.stage import Scorer, ThresholdFilter

from synth.summaries.entailment import judge_scores, load_scorer


@dataclass(frozen=True, kw_only=True)
class EntailmentScoreConfig:
    payload_field: str = "payload"
    summary_field: str = "summary"
    llm_judge: dict = field(default_factory=dict)  # {backend: {kind: vllm|openai|cpu, ...}} turns the judge on

    def __post_init__(self):
        unknown = set(self.llm_judge) - {"backend"}
        require(not unknown, f"unknown key(s) {sorted(unknown)} in llm_judge; expected 'backend'")
        require(not self.llm_judge or isinstance(self.llm_judge.get("backend"), dict),
                "llm_judge needs backend: {kind: ...}")


@register
class EntailmentScore(Scorer):
    name = "summary_entailment_score_v1"
    Config = EntailmentScoreConfig

    def score(self, table: pa.Table) -> dict[str, pa.Array]:
        c = self.config
        docs, sums = table.column(c.payload_field).to_pylist(), table.column(c.summary_field).to_pylist()
        score = load_scorer().score_pairs(docs, sums)
        if not c.llm_judge:
            return {"entail__score": pa.array(score, pa.float64())}
        from synth.generation.llm import get_backend

        llm = judge_scores(get_backend(c.llm_judge["backend"]), docs, sums)
        return {"entail__score": pa.array((score + llm) / 2, pa.float64()),
                "entail__llm_score": pa.array(llm, pa.float64())}


@dataclass(frozen=True, kw_only=True)
class EntailmentFilterConfig:
    threshold: float | None = None  # None = the threshold calibrated on SummaC with the model

    def __post_init__(self):
        require(self.threshold is None or 0.0 <= self.threshold <= 1.0, f"threshold must be in [0, 1]; got {self.threshold}")


@register
class EntailmentFilter(ThresholdFilter):
    name = "summary_entailment_filter_v1"
    Config = EntailmentFilterConfig
    reason = "not_entailed"  # a null score drops too
    requires = "summary_entailment_score_v1"

    def score_column(self) -> str:
        return "entail__score"

    def threshold(self) -> float:
        return self.config.threshold if self.config.threshold is not None else load_scorer().threshold
