"""Tiny byte-level stage mixtures over the bundled C4 sample, published in a session data root
(see training.byte_mixture.publish_tiny_mixtures), and a teacher trained once for the whole session."""

from __future__ import annotations

import pytest

from training.byte_mixture import publish_tiny_mixtures


# megatron-core 0.16 deprecation noise from inside its own layers (thousands per run), and the optional-package
# notices that training/__init__.py silences outside pytest (pytest resets warning filters per test)
_QUIET = (
    "ignore:.*tp_group is None:DeprecationWarning",
    "ignore:Transformer Engine and Apex are not installed",
    "ignore:Apex is not installed",
    "ignore:full scope is deprecated",
    "ignore:The pad token id in the tokenizer collides",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/training/" in str(item.fspath).replace("\\", "/"):
            for rule in _QUIET:
                item.add_marker(pytest.mark.filterwarnings(rule))


@pytest.fixture(scope="session")
def byte_root(tmp_path_factory, c4_docs):
    root = tmp_path_factory.mktemp("train-root")
    publish_tiny_mixtures(root, [d["text"] for d in c4_docs])
    return root
