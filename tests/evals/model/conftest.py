"""A tiny AFM-architecture checkpoint trained once per session on the bundled C4 sample (byte tokenizer),
and its Hugging Face export."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, c4_docs):
    from tests.training.helpers import quiet, tiny_cfg
    from training.byte_mixture import publish_tiny_mixtures
    from training.trainer import train

    root = tmp_path_factory.mktemp("eval-root")
    publish_tiny_mixtures(root, [d["text"] for d in c4_docs])
    return train(tiny_cfg(root, root / "run", steps=40), log=quiet).checkpoint


@pytest.fixture(scope="session")
def tiny_export(tiny_checkpoint, tmp_path_factory):
    from training.export_hf import export_hf

    return export_hf(tiny_checkpoint, tmp_path_factory.mktemp("eval-hf") / "hf")
