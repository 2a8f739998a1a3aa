"""Registers the math generator stages (corpus.registry imports every module here)."""

from synth.math import augment, cot, decontam, judges  # noqa: F401  (each module registers its stages)
