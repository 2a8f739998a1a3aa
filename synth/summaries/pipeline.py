"""The summary generator as an ordered list of stages.

    documents -> payloads (email / message / notification) -> teacher summaries -> rule filters
              -> injected copies -> injection check -> entailment score + filter -> embedding dedup
"""

from __future__ import annotations

from corpus.stage import Stage
from synth.stages.sft_dedup import EmbedDedupLocal

from synth.stages.summaries_filters import EntailmentFilter, EntailmentScore
from synth.stages.summaries_injection import InjectedCopies, InjectionCheck
from synth.stages.summaries_payloads import Payloads
from synth.stages.summaries_rules import SummaryRules
from synth.stages.summaries_teacher import TeacherSummaries


def summary_stages(backend: dict, *, max_tokens: int = 80, injection_fraction: float = 0.5, seed: int = 0,
                   max_words: int = 60, max_sentences: int = 6) -> list[Stage]:
    return [
        Payloads({"seed": seed, "max_sentences": max_sentences}),
        TeacherSummaries({"backend": backend, "max_tokens": max_tokens, "seed": seed}),
        SummaryRules({"max_words": max_words}),
        InjectedCopies({"fraction": injection_fraction, "seed": seed}),
        InjectionCheck({}),
        EntailmentScore({}),
        EntailmentFilter({}),
        EmbedDedupLocal({"fields": ["payload", "summary"], "threshold": 0.98}),
    ]
