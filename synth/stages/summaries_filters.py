"""The entailment score and filter for summaries (score, then decide).

`EntailmentScore` adds `entail__score`, the consistency of the summary with its payload. With
`method: nli` (the default) that is the entailment cross-encoder read the SummaC way
(synth/summaries/consistency.py, nli_model.py) and the shipped `fused` aggregator (aggregator.py): the
average of the model's mean sentence score and the lexical support score. With `method: support` it is
the lexical support score alone (entailment.py), which needs no model and is ~10x faster. Held out by
dataset the fused score has the better mean balanced accuracy (0.632 vs 0.607) at the same mean AUC
(0.764 vs 0.768; docs/synth.md). Both are calibrated on news summaries: payloads
such as emails, messages and notifications are another domain, so check the threshold on your own
data (`cidermill synth entailment-threshold`). Evidence columns: `entail__support` (the lexical score,
always), and with `nli` `entail__min_sentence` (the weakest sentence's best-window probability),
`entail__sentences` and `entail__model_sentences` (how many the model read; the rest were settled by
the lexical first pass: copied word for word, or naming something the payload lacks), and
`entail__model_precision` (bf16 where the CPU computes it natively, else fp32; null when the model read
nothing: scores differ between the two by about 0.01).
With `llm_judge: {backend: {...}}` it also adds `entail__llm_score` (the share of summary sentences an
LLM says the payload supports) and `entail__score` becomes the mean of the two. `EntailmentFilter`
drops rows below the calibrated threshold of the same `method` (or one given) as `not_entailed`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from manifests.config import require
from corpus.registry import register
from corpus.stage import Scorer, ThresholdFilter

from synth.summaries.entailment import judge_scores, load_scorer
from synth.summaries.scoring import METHODS, score_summaries, shipped_threshold


def _require_method(method: str) -> None:
    require(method in METHODS, f"method must be one of {METHODS}; got {method!r}")


@dataclass(frozen=True, kw_only=True)
class EntailmentScoreConfig:
    payload_field: str = "payload"
    summary_field: str = "summary"
    method: str = "nli"  # held out, the better balanced accuracy of the two (see the docstring)
    llm_judge: dict = field(default_factory=dict)  # {backend: {kind: vllm|openai|cpu, ...}} turns the judge on

    def __post_init__(self):
        _require_method(self.method)
        unknown = set(self.llm_judge) - {"backend"}
        require(not unknown, f"unknown key(s) {sorted(unknown)} in llm_judge; expected 'backend'")
        require(not self.llm_judge or isinstance(self.llm_judge.get("backend"), dict),
                "llm_judge needs backend: {kind: ...}")


def _resources(method: str) -> dict:
    from synth.summaries import aggregator, entailment, nli_model

    if method == "support":
        return {"support_model": entailment.MODEL_PATH}
    return {"support_model": entailment.MODEL_PATH, "consistency_model": aggregator.MODEL_PATH,
            "nli_weights": nli_model.SHIPPED_DIR / nli_model.WEIGHTS_NAME,
            "nli_manifest": nli_model.SHIPPED_DIR / nli_model.MANIFEST_NAME}


@register
class EntailmentScore(Scorer):
    name = "summary_entailment_score_v2"  # v2: the entailment model (v1 was the lexical support score)
    Config = EntailmentScoreConfig

    def resources(self) -> dict:
        return _resources(self.config.method)

    def score(self, table: pa.Table) -> dict[str, pa.Array]:
        c = self.config
        docs, sums = table.column(c.payload_field).to_pylist(), table.column(c.summary_field).to_pylist()
        support = load_scorer().score_pairs(docs, sums)
        out = {"entail__support": pa.array(support, pa.float64())}
        if c.method == "support":
            score = support
        else:
            scored = score_summaries(docs, sums, method="nli", support=support)
            score = scored.score
            out["entail__min_sentence"] = pa.array([float(p.min()) for p in scored.per_sentence], pa.float64())
            out["entail__sentences"] = pa.array([len(p) for p in scored.per_sentence], pa.int32())
            out["entail__model_sentences"] = pa.array([int(m.sum()) for m in scored.by_model], pa.int32())
            precision = "bf16" if scored.counts.get("model_bf16") else "fp32"  # differs by CPU: shown per row
            out["entail__model_precision"] = pa.array([precision if m.any() else None for m in scored.by_model],
                                                      pa.string())
        if c.llm_judge:
            from synth.generation.llm import get_backend

            llm = judge_scores(get_backend(c.llm_judge["backend"]), docs, sums)
            out["entail__llm_score"] = pa.array(llm, pa.float64())
            score = (score + llm) / 2
        out["entail__score"] = pa.array(score, pa.float64())
        return out

    def counters(self, table: pa.Table, columns: dict[str, pa.Array]) -> dict[str, int]:
        if "entail__sentences" not in columns:
            return {}
        n, model = (sum(columns[k].to_pylist()) for k in ("entail__sentences", "entail__model_sentences"))
        out = {"sentences": n, "sentences_read_by_model": model, "sentences_settled_by_first_pass": n - model}
        for p in ("bf16", "fp32"):
            rows = columns["entail__model_precision"].to_pylist().count(p)
            if rows:
                out[f"rows_scored_in_{p}"] = rows
        return out


@dataclass(frozen=True, kw_only=True)
class EntailmentFilterConfig:
    method: str = "nli"  # the scorer's method, whose calibrated threshold is the default
    threshold: float | None = None  # None = the threshold calibrated on SummaC for `method`

    def __post_init__(self):
        _require_method(self.method)
        require(self.threshold is None or 0.0 <= self.threshold <= 1.0, f"threshold must be in [0, 1]; got {self.threshold}")


@register
class EntailmentFilter(ThresholdFilter):
    name = "summary_entailment_filter_v2"
    Config = EntailmentFilterConfig
    reason = "not_entailed"  # a null score drops too
    requires = "summary_entailment_score_v2"

    def resources(self) -> dict:
        return {} if self.config.threshold is not None else _resources(self.config.method)

    def score_column(self) -> str:
        return "entail__score"

    def threshold(self) -> float:
        if self.config.threshold is not None:
            return self.config.threshold
        return shipped_threshold(self.config.method)
