"""Helpers of the web-corpus stages (corpus/stages/web_*.py): word splitting, n-gram hashing,
charset handling, word lists, the safety model. Nothing here is a stage itself."""
