"""N chain-of-thought answers per question; keep the ones whose final answer is right.

With a ground truth (seeds, rephrases, reversions) a completion is kept when its final answer is
equivalent to it (`answers_equal`). Without one (evolved questions) the answers are grouped by
equivalence and the largest group wins if it has at least `min_votes` members and a strict
plurality; its completions are kept. Rows record how they were checked and the vote count.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from manifests.config import require
from corpus.registry import register
from synth.generation.generator import Generator, schema_with_provenance
from synth.generation.llm import LLMConfig, generate, get_backend

from synth.math.answers import answers_equal, extract_final
from synth.math.prompts import COT

SFT_SCHEMA = schema_with_provenance(
    pa.field("prompt", pa.string()), pa.field("response", pa.string()), pa.field("final_answer", pa.string()),
    pa.field("checked_by", pa.string()), pa.field("votes", pa.int32()), pa.field("n_samples", pa.int32()),
    pa.field("kind", pa.string()), pa.field("question_id", pa.string()),
)


def majority(finals: list[str | None], *, min_votes: int) -> tuple[str | None, int]:
    """(winning answer, votes) over equivalence classes; None when no strict plurality >= min_votes."""
    groups: list[list[str]] = []
    for f in finals:
        if f is None:
            continue
        for g in groups:
            if answers_equal(g[0], f):
                g.append(f)
                break
        else:
            groups.append([f])
    if not groups:
        return None, 0
    groups.sort(key=len, reverse=True)
    top = len(groups[0])
    if top < min_votes or (len(groups) > 1 and len(groups[1]) == top):
        return None, top
    return groups[0][0], top


@dataclass(frozen=True, kw_only=True)
class CotConfig(LLMConfig):
    n_samples: int = 4
    min_votes: int = 2
    max_kept_per_question: int = 1
    max_tokens: int = 256
    temperature: float = 0.7

    def __post_init__(self):
        super().__post_init__()
        require(self.n_samples >= 1, f"n_samples must be >= 1; got {self.n_samples}")
        require(1 <= self.min_votes <= self.n_samples, f"min_votes must be in 1..n_samples; got {self.min_votes}")
        require(self.max_kept_per_question >= 1, "max_kept_per_question must be >= 1")


def _finals_detail(finals: list, texts: list[str], **check) -> dict:
    """Evidence for a question whose samples failed the check: each sample's final answer (null: none
    found), what they had to match (`expected`) or agree on (`min_votes`), and the first reply's end
    when no sample had a final answer at all."""
    out = {**check, "finals": [None if f is None else str(f)[:20] for f in finals[:8]], "samples": len(finals)}
    if not any(finals) and texts:
        out["reply_tail"] = texts[0][-120:]
    return out


@register
class MathCotAnswers(Generator):
    name = "math_cot_answers_v1"
    Config = CotConfig
    schema = SFT_SCHEMA

    def expand(self, table: pa.Table) -> tuple[list[dict], list[tuple[int, str]]]:
        c = self.config
        qs = table.select(["id", "source", "question", "answer", "kind"]).to_pylist()
        params = c.sampling(n=c.n_samples)
        responses = generate(get_backend(c.backend), COT, [{"question": q["question"]} for q in qs], params=params)
        rows, dropped = [], []
        for i, (q, r) in enumerate(zip(qs, responses)):
            if r.error:
                dropped.append((i, "llm_error", {"error": r.error}))
                continue
            texts = [comp.text for comp in r.completions]
            finals = [extract_final(t) for t in texts]
            if q["answer"] is not None:
                target, checked, votes = q["answer"], "ground_truth", sum(answers_equal(f, q["answer"]) for f in finals)
                if votes == 0:
                    dropped.append((i, "no_answer_matches_ground_truth" if any(finals) else "no_final_answer",
                                    _finals_detail(finals, texts, expected=q["answer"])))
                    continue
            else:
                target, votes = majority(finals, min_votes=c.min_votes)
                checked = "majority_vote"
                if target is None:
                    dropped.append((i, "no_majority" if any(finals) else "no_final_answer",
                                    _finals_detail(finals, texts, min_votes=c.min_votes)))
                    continue
            kept = 0
            for j, (t, f) in enumerate(zip(texts, finals)):
                if kept >= c.max_kept_per_question or not answers_equal(f, target):
                    continue
                kept += 1
                rows.append({"id": f"{q['id']}-cot{j}", "source": q["source"], "prompt": q["question"],
                             "response": t.strip(), "final_answer": f, "checked_by": checked, "votes": votes,
                             "n_samples": len(texts), "kind": q["kind"], "question_id": q["id"], **r.provenance()})
        return rows, dropped
