"""The math generator as an ordered list of stages (what the demo and a YAML pipeline run).

    seeds -> decontam -> augment (seed, rephrase, reverse, evolve depth/breadth) -> embedding dedup
          -> decontam (generated questions too) -> solvability judge + filter -> difficulty judge
          -> depth threshold -> N chain-of-thought answers checked by ground truth / majority
"""

from __future__ import annotations

from corpus.stage import Stage
from synth.stages.sft_dedup import EmbedDedupLocal

from synth.stages.math_augment import MathAugment
from synth.stages.math_cot import MathCotAnswers
from synth.stages.math_decontam import MathDecontam
from synth.stages.math_judges import DifficultyJudge, DifficultyThreshold, KeepSolvable, SolvabilityJudge


def math_stages(backend: dict, *, n_samples: int = 4, cot_max_tokens: int = 256, gen_max_tokens: int = 160,
                dedup_threshold: float = 0.92, min_difficulty: int = 5, seed: int = 0,
                kinds: list[str] | None = None) -> list[Stage]:
    augment = {"backend": backend, "max_tokens": gen_max_tokens, "seed": seed}
    if kinds:
        augment["kinds"] = kinds
    return [
        MathDecontam({}),
        MathAugment(augment),
        EmbedDedupLocal({"fields": ["question"], "threshold": dedup_threshold}),
        MathDecontam({}),
        SolvabilityJudge({"backend": backend, "seed": seed}),
        KeepSolvable({}),
        DifficultyJudge({"backend": backend, "seed": seed}),
        DifficultyThreshold({"min_score": min_difficulty}),
        MathCotAnswers({"backend": backend, "n_samples": n_samples, "min_votes": max(1, (n_samples + 1) // 2),
                        "max_tokens": cot_max_tokens, "seed": seed}),
    ]
