"""The page-safety model of web_safety_v3: a linear model over ~100-word windows of a page, trained on
real labelled text (corpus/web/safety_train.py; the manifest beside the artifact names the data).

A window's logit is
    z = b + (sum of meaning weights of its words) / n + lex . log1p(term counts)
over its n words (the page-safety tokens of corpus/web/safety_terms.py, so obfuscations are resolved):
- meaning weights: a linear head on the mean static MiniLM vector of the window's words (each word's
  all-MiniLM-L6-v2 embedding, computed once per vocabulary word at training time), folded into one
  weight per word: the head is linear, so mean(E[w]) . u = mean(E[w] . u). Words the labelled data
  never showed still get a weight from what MiniLM puts them near. (Word n-gram weights were tried
  and dropped: they learn each source's vocabulary and scored lower on held-out sources.)
- term counts: the tiered word list's explicit and context terms per category in the window, as
  features with learned weights (not as rules).
The page's score is its worst window's P(unsafe); a page of up to WINDOW words is one window. A
second head (same features, no n-grams) names the worst window's category. Scoring is numpy over
arrays of word ids: a dict lookup per word, then prefix sums, so every window costs O(1).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import safety_terms

MODEL_PATH = Path(__file__).resolve().parent / "models" / "safety_page_v3.npz"
WINDOW = 100  # words; training units are 50-150 words (corpus/web/safety_units.py)
STRIDE = 50
N_LEX = 2 * len(safety_terms.CATEGORIES)  # (category, tier) term counts
_MODELS: dict[str, "PageModel"] = {}


@dataclass(frozen=True)
class PageModel:
    vocab: dict[str, int]
    meaning_weight: np.ndarray  # [V + 1] (last: unknown word, 0)
    lex_weight: np.ndarray  # [N_LEX]
    intercept: float
    categories: tuple[str, ...]
    cat_meaning: np.ndarray  # [V + 1, K]
    cat_lex: np.ndarray  # [N_LEX, K]
    cat_intercept: np.ndarray  # [K]
    threshold: float

    @property
    def unknown(self) -> int:
        return len(self.vocab)


@dataclass(frozen=True)
class PageScore:
    score: float  # worst window's P(unsafe)
    start: int  # worst window, word positions [start, end)
    end: int
    category: str | None  # category head at the worst window (None for an empty page)


def save(path: Path, arrays: dict[str, np.ndarray], manifest: dict) -> str:
    """Write the weights (.npz, no pickle) and the manifest (.json, with the weights' sha256); return the digest."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    path.with_suffix(".json").write_text(json.dumps({**manifest, "sha256": digest}, indent=1) + "\n", encoding="utf-8")
    _MODELS.pop(str(path), None)
    return digest


def from_arrays(z, threshold: float) -> PageModel:
    words = [str(w) for w in z["words"]]
    return PageModel(
        vocab={w: i for i, w in enumerate(words)},
        meaning_weight=np.asarray(z["meaning_weight"], np.float64), lex_weight=np.asarray(z["lex_weight"], np.float64),
        intercept=float(z["intercept"]), categories=tuple(str(c) for c in z["categories"]),
        cat_meaning=np.asarray(z["cat_meaning"], np.float64), cat_lex=np.asarray(z["cat_lex"], np.float64),
        cat_intercept=np.asarray(z["cat_intercept"], np.float64), threshold=float(threshold))


def load(path: Path | str = MODEL_PATH) -> PageModel:
    """The model and its manifest's threshold; a changed or truncated file is an error naming it."""
    path = Path(path)
    key = str(path)
    if key not in _MODELS:
        manifest_path = path.with_suffix(".json")
        if not path.is_file() or not manifest_path.is_file():
            raise FileNotFoundError(f"safety model {path} or its manifest {manifest_path.name} is missing; make them with "
                                    f"`python -m corpus.web.safety_train --data FOLDER`")
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != manifest.get("sha256"):
            raise ValueError(f"{path} does not match the sha256 in {manifest_path.name} (changed or truncated)")
        try:
            with np.load(path) as z:
                _MODELS[key] = from_arrays(z, manifest["threshold"])
        except (KeyError, ValueError) as exc:
            raise ValueError(f"{path}: not a page-safety model of corpus/web/safety_page.py ({exc})") from None
    return _MODELS[key]


def token_ids(toks: list[str], model: PageModel) -> np.ndarray:
    get, unknown = model.vocab.get, model.unknown
    return np.fromiter((get(t, unknown) for t in toks), np.int64, len(toks))


def lex_positions(toks: list[str], lex: safety_terms.Lexicon) -> np.ndarray:
    """[n, N_LEX] one-hot of the list term (category, tier) starting at each word."""
    out = np.zeros((len(toks), N_LEX), np.int32)
    for pos, cat, tier in safety_terms.hits(toks, lex):
        out[pos, 2 * cat + tier] += 1
    return out


def window_bounds(n: int, window: int = WINDOW, stride: int = STRIDE) -> np.ndarray:
    """[w, 2] start/end of the windows: one for a page of up to `window` words; else every `stride`
    words, the last one ending at the page's end."""
    if n <= window:
        return np.array([[0, n]], np.int64)
    starts = np.arange(0, n - window + 1, stride)
    if starts[-1] + window < n:
        starts = np.append(starts, n - window)
    return np.stack([starts, starts + window], 1)


def _prefix(values: np.ndarray) -> np.ndarray:
    return np.concatenate([np.zeros((1,) + values.shape[1:], values.dtype), np.cumsum(values, axis=0)])


def window_logits(ids: np.ndarray, lexpos: np.ndarray, model: PageModel, bounds: np.ndarray) -> np.ndarray:
    """The logit of each window [start, end) (module docstring)."""
    s, e = bounds[:, 0], bounds[:, 1]
    n = np.maximum(e - s, 1).astype(np.float64)
    meaning = _prefix(model.meaning_weight[ids])
    counts = _prefix(lexpos)
    return model.intercept + (meaning[e] - meaning[s]) / n + np.log1p(counts[e] - counts[s]) @ model.lex_weight


def category_of(ids: np.ndarray, lexpos: np.ndarray, model: PageModel, start: int, end: int) -> str:
    n = max(end - start, 1)
    z = model.cat_intercept + model.cat_meaning[ids[start:end]].sum(0) / n \
        + np.log1p(lexpos[start:end].sum(0)) @ model.cat_lex
    return model.categories[int(np.argmax(z))]


def score_tokens(toks: list[str], model: PageModel, lex: safety_terms.Lexicon,
                 lexpos: np.ndarray | None = None) -> PageScore:
    if not toks:
        return PageScore(float(1.0 / (1.0 + math.exp(-model.intercept))), 0, 0, None)
    ids = token_ids(toks, model)
    lexpos = lex_positions(toks, lex) if lexpos is None else lexpos
    bounds = window_bounds(len(toks))
    z = window_logits(ids, lexpos, model, bounds)
    worst = int(np.argmax(z))
    start, end = int(bounds[worst, 0]), int(bounds[worst, 1])
    p = 1.0 / (1.0 + math.exp(-max(min(float(z[worst]), 50.0), -50.0)))
    return PageScore(p, start, end, category_of(ids, lexpos, model, start, end))


def top_words(toks: list[str], model: PageModel, start: int, end: int, k: int = 5) -> list[str]:
    """The window's distinct words of highest positive meaning weight (the evidence a drop carries
    besides the list terms), highest first."""
    weights = {t: model.meaning_weight[model.vocab.get(t, model.unknown)] for t in set(toks[start:end])}
    return [t for t, w in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0])) if w > 0][:k]
