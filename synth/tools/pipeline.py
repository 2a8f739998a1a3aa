"""The tool-use generator as an ordered list of stages.

    dialogues -> single-call examples + negatives -> LLM bootstrap -> parallel merges
              -> distractor tools -> embedding dedup of requests -> schema validation of every call
"""

from __future__ import annotations

from corpus.stage import Stage
from synth.stages.sft_dedup import EmbedDedupLocal

from synth.stages.tools_augment import AddDistractors, ParallelCalls
from synth.stages.tools_bootstrap import BootstrapExamples
from synth.stages.tools_examples import ToolExamples
from synth.stages.tools_filters import ToolCallValidate


def tool_stages(backend: dict, *, max_bootstrap: int = 1000, max_pairs: int = 100, k_distractors: int = 3,
                max_tokens: int = 160, seed: int = 0) -> list[Stage]:
    return [
        ToolExamples({}),
        BootstrapExamples({"backend": backend, "max_seeds": max_bootstrap, "max_tokens": max_tokens, "seed": seed}),
        ParallelCalls({"max_pairs": max_pairs, "seed": seed}),
        AddDistractors({"k": k_distractors, "seed": seed}),
        EmbedDedupLocal({"fields": ["messages", "calls"], "threshold": 0.97}),
        ToolCallValidate({}),
    ]
