"""Registers the coding-triplet stages (corpus.registry imports every module here)."""

from synth.coding import questions, triplets  # noqa: F401  (each module registers its stages)
