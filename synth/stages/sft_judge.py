"""Model-based filtering for any SFT dataset: an LLM judge rates each (prompt, response) pair.

Score, then decide: `LLMJudgeScore` adds `judge__score` (1-10, null when the judge's reply has no
rating) and `JudgeThreshold` drops rows below a threshold with the reason, so a new threshold does
not re-run the judge.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

from manifests.config import require
from corpus.registry import register
from corpus.stage import Scorer, ThresholdFilter


from synth.generation.llm import LLMConfig, generate, get_backend
from synth.generation.template import PromptTemplate

JUDGE_QUALITY = PromptTemplate(
    id="sft_quality_judge", version="v1",
    system="You grade answers written by an assistant. Reply with a single line: 'Rating: N' where N is 1 to 10.",
    user="Request:\n{prompt}\n\nAnswer:\n{response}\n\nHow correct, helpful and complete is the answer? "
         "10 = fully correct and helpful, 1 = wrong or useless.",
)

_RATING = re.compile(r"(?:rating|score)\s*[:=]?\s*(10|[1-9])\b|^\s*(10|[1-9])\s*(?:/\s*10)?\s*$", re.I | re.M)


def parse_rating(text: str) -> int | None:
    """'Rating: 7' / 'Score = 7/10' / a bare '7' -> 7; anything else -> None (never guessed)."""
    m = _RATING.search(text or "")
    if not m:
        return None
    return int(m.group(1) or m.group(2))


@dataclass(frozen=True, kw_only=True)
class JudgeConfig(LLMConfig):
    prompt_field: str = "prompt"
    response_field: str = "response"
    max_tokens: int = 8

    def __post_init__(self):
        super().__post_init__()


@register
class LLMJudgeScore(Scorer):
    name = "sft_llm_judge_v1"
    Config = JudgeConfig

    def score(self, table: pa.Table) -> dict[str, pa.Array]:
        c = self.config
        items = [{"prompt": p or "", "response": r or ""}
                 for p, r in zip(table.column(c.prompt_field).to_pylist(), table.column(c.response_field).to_pylist())]
        params = c.sampling()
        responses = generate(get_backend(c.backend), JUDGE_QUALITY, items, params=params)
        return {"judge__score": pa.array([parse_rating(r.text) for r in responses], pa.int32())}


@dataclass(frozen=True, kw_only=True)
class JudgeThresholdConfig:
    min_score: int = 6
    column: str = "judge__score"
    drop_unparsed: bool = True  # a judge reply without a rating is no evidence of quality

    def __post_init__(self):
        require(1 <= self.min_score <= 10, f"min_score must be 1..10; got {self.min_score}")


@register
class JudgeThreshold(ThresholdFilter):
    name = "sft_judge_threshold_v1"
    Config = JudgeThresholdConfig
    reason = "judge_below_threshold"
    requires = "sft_llm_judge_v1"

    @property
    def null_reason(self) -> str | None:  # a reply without a rating: dropped as unparsed, or kept
        return "judge_unparsed" if self.config.drop_unparsed else None
