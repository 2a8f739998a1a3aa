"""Synthetic-data stages; every module here is imported by corpus.registry (adding a stage = adding a file)."""
