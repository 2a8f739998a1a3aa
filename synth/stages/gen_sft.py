"""Registers the dataset-agnostic SFT stages: embedding dedup (global and in-table), LLM judge."""

from synth.sft import dedup, judge  # noqa: F401  (registration)
