"""Tiny byte-level stage mixtures over the bundled C4 sample, published in a session data root
(see training.byte_mixture.publish_tiny_mixtures), and a teacher trained once for the whole session."""

from __future__ import annotations

import pytest

from training.byte_mixture import publish_tiny_mixtures


@pytest.fixture(scope="session")
def byte_root(tmp_path_factory, c4_docs):
    root = tmp_path_factory.mktemp("train-root")
    publish_tiny_mixtures(root, [d["text"] for d in c4_docs])
    return root
