"""Tiny byte-level mixtures over the bundled C4 sample, published in a session data root.

Components: C4 documents split at the median length into `web-short` and `web-long`; the three stage
mixtures weight them differently (context-lengthening up-weights long documents, as the report does).
"""

from __future__ import annotations

import pytest

from training.byte_mixture import publish_byte_mixture

CORE_SEQ, CONTINUED_SEQ, CONTEXT_SEQ = 64, 128, 256


@pytest.fixture(scope="session")
def byte_root(tmp_path_factory, c4_docs):
    root = tmp_path_factory.mktemp("train-root")
    texts = sorted((d["text"] for d in c4_docs), key=len)
    short, long_ = texts[: len(texts) // 2], texts[len(texts) // 2:]
    publish_byte_mixture(root, name="tiny-core", stage="core", seq_length=CORE_SEQ, token_budget=CORE_SEQ * 16 * 200,
                         components={"web-short": (0.5, short), "web-long": (0.5, long_)})
    publish_byte_mixture(root, name="tiny-continued", stage="continued", seq_length=CONTINUED_SEQ,
                         token_budget=CONTINUED_SEQ * 8 * 30,
                         components={"web-short": (0.3, short), "web-long": (0.7, long_)})
    publish_byte_mixture(root, name="tiny-context", stage="context-lengthening", seq_length=CONTEXT_SEQ,
                         token_budget=CONTEXT_SEQ * 4 * 30,
                         components={"web-short": (0.1, short), "web-long": (0.9, long_)})
    return root
