"""The summary generator as an ordered list of stages.

    documents -> payloads (email / message / notification) -> teacher summaries -> rule filters
              -> injected copies -> injection check -> entailment score + filter -> embedding dedup
"""

from __future__ import annotations

from corpus.stage import Stage
from synth.sft.dedup import EmbedDedupLocal

from .filters import EntailmentFilter, EntailmentScore
from .injection import InjectedCopies, InjectionCheck
from .payloads import Payloads
from .rules import SummaryRules
from .teacher import TeacherSummaries


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
