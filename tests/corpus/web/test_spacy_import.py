"""spaCy is imported without torch (corpus/web/words.py `import_spacy`): thinc probes for torch at import,
which the tokenizer never uses and which costs a second of CPU per process. torch stays importable after."""

import subprocess
import sys

import pytest

pytest.importorskip("spacy")

CODE = """
import sys
import corpus.web.spacy_import  # what the forkserver preloads for the Gopher, C4 and FineWeb stages
from corpus.web.words import words_of
print(words_of("It's a (test), isn't it?"))
print("torch" in sys.modules)
import thinc.compat
print(thinc.compat.has_torch)
try:
    import torch  # noqa: F401
    print("importable")
except ImportError:
    print("not installed")
"""


def test_spacy_words_without_torch_and_torch_still_importable():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == str(["It", "'s", "a", "(", "test", ")", ",", "is", "n't", "it", "?"])
    assert out[1:3] == ["False", "False"]
    assert out[3] in ("importable", "not installed")


CLI = """
import sys
import corpus.web.spacy_import
print("spacy.cli.info" in sys.modules, "weasel" in sys.modules, "typer" in sys.modules)
import spacy
import spacy.cli  # the real command line is still there when asked for
print(getattr(sys.modules["spacy.cli.info"], "_cidermill_stand_in", False), type(spacy.info(silent=True)).__name__)
"""


def test_spacy_imports_without_its_command_line_which_stays_importable():
    out = subprocess.run([sys.executable, "-c", CLI], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "False False False"  # the stand-in is gone; the CLI's heavy imports did not happen
    assert out[1] == "False dict"  # spacy.info still works, through the real CLI
