"""Stages register themselves on import; every module here is loaded by corpus.registry."""
