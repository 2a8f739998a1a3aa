"""Registers the tool-use generator stages (corpus.registry imports every module here)."""

from synth.tools import augment, bootstrap, examples, filters  # noqa: F401  (each module registers its stages)
