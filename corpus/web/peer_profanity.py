"""alt-profanity-check's `predict_prob`, bit for bit, without importing scikit-learn in every process.

The package loads a pickled scikit-learn model when imported: scikit-learn's import and the unpickling cost
~1.2 CPU-s in every process that scores a page, about 7% of the whole web pipeline's CPU on 1,000 pages. The
model is small and linear: a TF-IDF vectoriser (lowercase, `\\b\\w\\w+\\b` tokens, unigrams, idf, l2 norm) and
five LinearSVC + sigmoid calibrators whose probabilities are averaged. So its arrays (vocabulary, idf,
weights, intercepts, sigmoid a and b) are read from the package's model once and cached under
CIDERMILL_CACHE, keyed by the sha256 of its model files and the scikit-learn version; `predict_prob` then does
scikit-learn's arithmetic in the same order (counts in column order, idf product, l2 norm summed row by row
as its Cython loop does, the same scipy sparse product, `expit`, the mean accumulated classifier by
classifier), so the probabilities are equal to the package's, not merely close
(tests/corpus/web/test_peer_profanity.py checks equality on real text). A model of another shape (a
future package version) is not imitated: the package itself is called.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import re
import zipfile
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import numpy as np

_FILES = ("vectorizer.joblib", "model.joblib")
_FORMAT = "peer-profanity 1"


def _model_files() -> list[bytes]:
    # found without importing the package: its import is the cost avoided here
    spec = importlib.util.find_spec("profanity_check")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("alt-profanity-check is not installed", name="profanity_check")
    data = Path(list(spec.submodule_search_locations)[0]) / "data"
    return [(data / name).read_bytes() for name in _FILES]


def _extract() -> dict[str, np.ndarray] | None:
    """The model's arrays, read through scikit-learn; None when the model is not the shape imitated here."""
    from profanity_check import profanity_check as package

    vec, model = package.vectorizer, package.model
    p = vec.get_params()
    calibrated = getattr(model, "calibrated_classifiers_", [])
    if not (type(vec).__name__ == "TfidfVectorizer" and p["analyzer"] == "word" and p["ngram_range"] == (1, 1)
            and p["lowercase"] and p["preprocessor"] is None and p["tokenizer"] is None and p["strip_accents"] is None
            and not p["binary"] and not p["sublinear_tf"] and p["norm"] == "l2" and hasattr(vec._tfidf, "idf_")
            and vec.dtype == np.float64 and type(model).__name__ == "CalibratedClassifierCV" and calibrated
            and list(model.classes_) == [0, 1]):
        return None
    for c in calibrated:
        est = c.estimator
        if not (c.method == "sigmoid" and list(c.classes) == [0, 1] and list(est.classes_) == [0, 1]
                and type(est).__name__ == "LinearSVC" and est.coef_.shape == (1, len(vec.vocabulary_))
                and len(c.calibrators) == 1 and type(c.calibrators[0]).__name__ == "_SigmoidCalibration"):
            return None
    stop = vec.get_stop_words() or frozenset()
    terms = sorted(vec.vocabulary_, key=vec.vocabulary_.__getitem__)
    if [vec.vocabulary_[t] for t in terms] != list(range(len(terms))) or any(t in stop for t in terms):
        return None   # stop words are removed before lookup; a vocabulary without them makes that a no-op
    return {"terms": np.array(terms, dtype=str), "pattern": np.array(p["token_pattern"], dtype=str),
            "idf": np.asarray(vec.idf_, np.float64),
            "coef": np.stack([c.estimator.coef_ for c in calibrated]).astype(np.float64, copy=False),
            "intercept": np.stack([c.estimator.intercept_ for c in calibrated]).astype(np.float64, copy=False),
            "a": np.array([c.calibrators[0].a_ for c in calibrated], np.float64),
            "b": np.array([c.calibrators[0].b_ for c in calibrated], np.float64)}


def _valid(arrays: dict) -> bool:
    n = len(arrays["terms"])
    k = len(arrays["a"])
    return (n > 0 and k > 0 and arrays["idf"].shape == (n,) and arrays["coef"].shape == (k, 1, n)
            and arrays["intercept"].shape == (k, 1) and arrays["b"].shape == (k,) and arrays["pattern"].ndim == 0
            and all(a.dtype == np.float64 for key, a in arrays.items() if key not in ("terms", "pattern")))


@lru_cache(maxsize=1)
def _model():
    """(token regex, term -> column, arrays, word -> columns cache for predict_prob_words), or None: use the
    package itself."""
    from ..code.paths import cache_dir, store_cache_entry

    files = _model_files()
    key = hashlib.sha256(f"{_FORMAT}\0{metadata.version('scikit-learn')}\0".encode())
    for raw in files:
        key.update(hashlib.sha256(raw).digest())
    path = cache_dir("peer-profanity") / f"{key.hexdigest()[:32]}.npz"
    arrays = None
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        if not _valid(arrays):
            arrays = None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):   # missing, truncated, not ours: again
        arrays = None
    if arrays is None:
        arrays = _extract()
        if arrays is None:
            return None
        store_cache_entry(path, lambda tmp: np.savez(tmp, **arrays))
    column = {t: i for i, t in enumerate(arrays["terms"].tolist())}
    return re.compile(str(arrays["pattern"])), column, arrays, {}


def predict_prob(texts: list[str]) -> np.ndarray:
    """alt-profanity-check's P(profane) per text, equal to `profanity_check.predict_prob(texts)`."""
    model = _model()
    if model is None:
        from profanity_check import predict_prob as package_predict_prob

        return package_predict_prob(texts)
    pattern, column, _, _ = model
    return _probs(model, [[column[t] for t in pattern.findall(text.lower()) if t in column] for text in texts])


_WORD_IDS_MAX = 1 << 20  # words kept in a model's cache before it starts afresh


def predict_prob_words(blocks: list[list[str]]) -> np.ndarray:
    """`predict_prob([" ".join(b) for b in blocks])` for blocks of lower-case words without whitespace (as
    safety_terms.tokens gives them). A joined text's tokens are its words' tokens in order (no token spans the
    space), so each distinct word is tokenised once per process, not once per occurrence."""
    model = _model()
    if model is None:
        return predict_prob([" ".join(b) for b in blocks])
    pattern, column, _, cache = model
    if len(cache) > _WORD_IDS_MAX:
        cache.clear()
    ids = []
    for block in blocks:
        try:
            ids.append([j for w in block for j in cache[w]])
        except KeyError:
            for w in block:
                if w not in cache:
                    cache[w] = tuple(column[t] for t in pattern.findall(w.lower()) if t in column)
            ids.append([j for w in block for j in cache[w]])
    return _probs(model, ids)


def _probs(model, ids: list[list[int]]) -> np.ndarray:
    """The probabilities from each text's vocabulary columns, one per token in text order."""
    import scipy.sparse as sp
    from scipy.special import expit

    _, column, arrays, _ = model
    n_texts, n_features = len(ids), len(column)
    rows, cols = [], []
    for i, row in enumerate(ids):
        rows += [i] * len(row)
        cols += row
    # (row, column) pairs sorted and counted: the CSR matrix of counts with sorted indices (CountVectorizer)
    keys, counts = np.unique(np.array(rows, np.int64) * n_features + np.array(cols, np.int64), return_counts=True)
    indices = (keys % n_features).astype(np.int32)
    indptr = np.searchsorted(keys // n_features, np.arange(n_texts + 1), side="left").astype(np.int32)
    data = counts.astype(np.float64)
    data *= arrays["idf"][indices]
    # l2 norm per row, summed in index order as scikit-learn's inplace_csr_row_normalize_l2 does (no pairwise sum)
    squares = (data * data).tolist()
    bounds = indptr.tolist()
    for i in range(n_texts):
        total = 0.0
        for v in squares[bounds[i]:bounds[i + 1]]:
            total += v
        if total != 0.0:
            data[bounds[i]:bounds[i + 1]] /= math.sqrt(total)
    x = sp.csr_array((data, indices, indptr), shape=(n_texts, n_features))
    mean = np.zeros(n_texts)
    for coef, intercept, a, b in zip(arrays["coef"], arrays["intercept"], arrays["a"], arrays["b"]):
        scores = (x @ coef.T + intercept).reshape(-1)   # LinearSVC.decision_function
        mean += expit(-(a * scores + b))                # _SigmoidCalibration.predict, P(class 1)
    mean /= len(arrays["a"])
    return mean
