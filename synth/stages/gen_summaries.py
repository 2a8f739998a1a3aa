"""Registers the summary generator stages (corpus.registry imports every module here)."""

from synth.summaries import filters, injection, payloads, rules, teacher  # noqa: F401  (registration)
