"""LLM judges for generated math questions: solvability (yes/no) and difficulty (1-10).

Score, then decide: the scorers add `judge__solvable` (bool, null when the reply is neither yes nor
no) and `difficulty__score` (int 1-10, null when unparsable); the filters drop with reasons. The
solvability judge looks only at questions without a ground truth (evolved ones): seeds, rephrases
(numbers checked) and reversions (built by rule from a solved problem) are solvable by construction,
and a small judge saying "no" to them would only lose good rows. The difficulty threshold applies
only to the kinds named (the depth-evolved set by default): harder versions that the judge does
not find harder are not worth keeping.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from manifests.config import require
from corpus.registry import register
from corpus.stage import Filter, Scorer, evidence
from synth.stages.sft_judge import parse_rating
from synth.generation.llm import LLMConfig, generate, get_backend

from synth.math.prompts import DIFFICULTY, SOLVABLE


def parse_yes_no(text: str) -> bool | None:
    m = re.search(r"\b(yes|no)\b", (text or "").lower())
    return None if not m else m.group(1) == "yes"


@dataclass(frozen=True, kw_only=True)
class JudgeConfig(LLMConfig):
    text_field: str = "question"
    max_tokens: int = 6

    def __post_init__(self):
        super().__post_init__()


def _judge(config: JudgeConfig, template, table: pa.Table, rows: list[int] | None = None) -> list[str | None]:
    """Judge replies per row; rows not in `rows` (when given) are not asked and get None."""
    params = config.sampling()
    questions = table.column(config.text_field).to_pylist()
    asked = list(range(len(questions))) if rows is None else rows
    replies = generate(get_backend(config.backend), template, [{"question": questions[i] or ""} for i in asked],
                       params=params)
    out: list[str | None] = [None] * len(questions)
    for i, r in zip(asked, replies):
        out[i] = r.text
    return out


@register
class SolvabilityJudge(Scorer):
    name = "math_solvability_judge_v1"
    Config = JudgeConfig

    def score(self, table: pa.Table) -> dict[str, pa.Array]:
        rows = None
        if "answer" in table.schema.names:  # only questions without a ground truth need the judge
            rows = [i for i, a in enumerate(table.column("answer").to_pylist()) if a is None]
        replies = _judge(self.config, SOLVABLE, table, rows)
        return {"judge__solvable": pa.array([parse_yes_no(t) if t is not None else None for t in replies], pa.bool_())}


@dataclass(frozen=True, kw_only=True)
class KeepSolvableConfig:
    drop_unparsed: bool = False  # a 135M judge often answers off-format; unparsed = no evidence either way
    # (rows the judge was not asked about - those with a ground truth - are null and always kept)


@register
class KeepSolvable(Filter):
    name = "math_keep_solvable_v1"
    Config = KeepSolvableConfig

    def reasons(self, table: pa.Table) -> pa.Array:
        v = table.column("judge__solvable")
        out = pc.if_else(pc.equal(v, False), pa.scalar("judged_unsolvable"), pa.scalar(None, pa.string()))
        if self.config.drop_unparsed:
            unparsed = pc.is_null(v)
            if "answer" in table.schema.names:  # rows with a ground truth were not asked
                unparsed = pc.and_(unparsed, pc.is_null(table.column("answer")))
            out = pc.if_else(unparsed, pa.scalar("solvable_unparsed"), out)
        return out

    def details(self, table: pa.Table, dropped: pa.Array) -> list[str]:
        """The judge's verdict column and value (false: judged unsolvable; null: the reply had no yes/no)."""
        return evidence({"column": "judge__solvable", "value": v}
                        for v in table.column("judge__solvable").take(dropped).to_pylist())


@register
class DifficultyJudge(Scorer):
    name = "math_difficulty_judge_v1"
    Config = JudgeConfig

    def score(self, table: pa.Table) -> dict[str, pa.Array]:
        replies = _judge(self.config, DIFFICULTY, table)
        return {"difficulty__score": pa.array([parse_rating(t or "") for t in replies], pa.int32())}


@dataclass(frozen=True, kw_only=True)
class DifficultyThresholdConfig:
    min_score: int = 5
    kinds: list[str] = field(default_factory=lambda: ["evolve_depth"])

    def __post_init__(self):
        require(1 <= self.min_score <= 10, f"min_score must be 1..10; got {self.min_score}")


@register
class DifficultyThreshold(Filter):
    name = "math_difficulty_threshold_v1"
    Config = DifficultyThresholdConfig

    def reasons(self, table: pa.Table) -> pa.Array:
        in_scope = pc.is_in(table.column("kind"), value_set=pa.array(self.config.kinds, pa.string()))
        score = table.column("difficulty__score")
        too_easy = pc.and_(in_scope, pc.less(score, self.config.min_score))
        unknown = pc.and_(in_scope, pc.is_null(score))
        out = pc.if_else(pc.fill_null(too_easy, False), pa.scalar("below_difficulty"), pa.scalar(None, pa.string()))
        return pc.if_else(unknown, pa.scalar("difficulty_unparsed"), out)

    def details(self, table: pa.Table, dropped: pa.Array) -> list[str]:
        """The judge's rating (null: unparsable), the threshold, and the row's kind that put it in scope."""
        picked = table.select(["difficulty__score", "kind"]).take(dropped).to_pylist()
        return evidence({"column": "difficulty__score", "value": r["difficulty__score"], "min": self.config.min_score,
                         "kind": r["kind"]} for r in picked)
