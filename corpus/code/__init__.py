"""Code corpus: repository ingest helpers, license detection, language id, code heuristics."""
