"""Registers the long-context Q&A generator stage (corpus.registry imports every module here)."""

from synth.longcontext import qa  # noqa: F401  (registration)
