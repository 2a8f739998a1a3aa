"""Fixtures for the generator tests: a scripted backend registered under a name stages can use."""

from __future__ import annotations

import pytest

from synth.backends import ScriptedBackend
from synth.generation.llm import register_backend


@pytest.fixture
def scripted():
    """Returns a function: scripted(reply) -> the backend spec `{kind: registered, name: ...}`."""
    made = []

    def make(reply):
        name = f"test-{len(made)}-{id(reply)}"
        backend = ScriptedBackend(reply)
        register_backend(name, backend)
        made.append(backend)
        return {"kind": "registered", "name": name}

    return make
