"""Importing this module imports spaCy without torch (corpus/web/words.py, `import_spacy`): the name the
stages that tokenize with spaCy give the local executor to preload once per run (Stage.preload)."""

from .words import import_spacy

import_spacy()
