"""The page-safety model: hashed word 1-2-grams -> logistic regression, trained offline by the project on
page-length texts (corpus/web/safety_data.py says which and how they are split and labelled).

    python -m corpus.web.safety_model train --data FOLDER   # FOLDER: the shared data of a dev machine

writes corpus/web/models/safety_page_v2.npz (weights, no pickle) and safety_page_v2.json, the manifest:
training data, settings, dev and eval metrics, the genre check, and the threshold with how it was chosen
(the highest score that keeps false drops on held-out ordinary web text within the budget, 0.5%).

Genre: red-team positives are chat; so chat instructions are negatives too, chat markers and
first/second-person pronouns are not features, and the manifest reports the model's AUC inside each
genre and a genre-only probe (a model trained to tell chat from prose, scored on the safety labels).
Features: the set of word unigrams and bigrams of the page's first MAX_WORDS tokens (the page-safety
tokenizer of corpus/web/safety_terms.py, so obfuscations are resolved), stop words removed, binary,
scaled by 1/sqrt(distinct words + word pairs); the artifact keeps the KEEP features of largest weight. Scoring is a dict lookup per
feature (numpy only), fast enough for the stage's speed target.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

MODEL_PATH = Path(__file__).resolve().parent / "models" / "safety_page_v2.npz"
MAX_WORDS = 400
KEEP = 8000
BUDGET = 0.005
# chat register, not harm: left out of the features so the model cannot lean on genre
STOP = ["i", "me", "my", "you", "your", "we", "us", "our", "how", "what", "why", "where", "when", "can", "could",
        "would", "should", "do", "does", "did", "please", "hi", "hello", "thanks", "thank", "human", "assistant",
        "is", "are", "it", "there", "that", "this", "if", "so", "ok", "okay", "yes", "no", "just", "tell", "know"]
_MODEL: dict = {}


_STOP = frozenset(STOP) | frozenset("abcdefghijklmnopqrstuvwxyz0123456789")  # and one-character tokens


def _words(toks: list[str]) -> list[str]:
    return [t for t in toks[:MAX_WORDS] if t not in _STOP]


def page_features(toks: list[str]) -> set[str]:
    """Binary unigram + bigram features of a page's tokens (from safety_terms.tokens)."""
    words = _words(toks)
    feats = set(words)
    feats.update([a + " " + b for a, b in zip(words, words[1:])])
    return feats


def _norm(words: list[str]) -> float:
    """The feature vector's scale: 1/sqrt(distinct words + word pairs), the pairs counted with repeats
    (cheap to get at scoring time; training uses the same)."""
    return 1.0 / np.sqrt(max(len(set(words)) + len(words) - 1, 1))


def _matrix(texts: list[str]):
    from sklearn.feature_extraction.text import TfidfVectorizer

    from . import safety_terms

    lex = safety_terms.load()
    from scipy.sparse import diags

    toks = [safety_terms.tokens(t, lex) for t in texts]
    vec = TfidfVectorizer(analyzer=lambda t: list(page_features(t)), binary=True, use_idf=False, norm=None,
                          lowercase=False)
    x = vec.fit_transform(toks)
    return vec, diags([_norm(_words(t)) for t in toks]) @ x


def _auc(y, s) -> float | None:
    from sklearn.metrics import roc_auc_score

    y = np.asarray(y)
    return float(roc_auc_score(y, s)) if 0 < y.sum() < len(y) else None


def _transform(vec, texts: list[str]):
    from scipy.sparse import diags

    from . import safety_terms

    lex = safety_terms.load()
    toks = [safety_terms.tokens(t, lex) for t in texts]
    return diags([_norm(_words(t)) for t in toks]) @ vec.transform(toks)


def choose_threshold(ordinary_scores: np.ndarray, budget: float = BUDGET) -> float:
    """The lowest threshold (drop when score > it) that drops at most `budget` of the ordinary pages."""
    s = np.sort(np.asarray(ordinary_scores, np.float64))[::-1]
    allowed = int(np.floor(budget * len(s)))
    return float(s[allowed]) if allowed < len(s) else 0.0


def train(data: Path, out: Path = MODEL_PATH, cache: Path | None = None, web_limit: int | None = None) -> dict:
    from sklearn.linear_model import LogisticRegression

    from . import safety_data

    train_pages = safety_data.model_pages(data, "train", cache, web_limit)
    dev_pages = safety_data.model_pages(data, "dev", cache, web_limit)
    y = np.array([p[2] for p in train_pages])
    vec, x = _matrix([p[3] for p in train_pages])
    settings = {"features": f"binary word 1-2-grams of the first {MAX_WORDS} tokens, scaled by 1/sqrt(distinct words + pairs); the {KEEP} largest weights kept",
                "stop_words": STOP, "model": "LogisticRegression(C=2.0, class_weight='balanced')", "budget": BUDGET}
    model = LogisticRegression(C=2.0, max_iter=3000, class_weight="balanced").fit(x, y)
    names = vec.get_feature_names_out()
    coef = model.coef_[0]
    keep = np.argsort(-np.abs(coef))[:KEEP]
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, features=np.array(names[keep], dtype=str), coef=coef[keep].astype(np.float32),
                        intercept=np.float32(model.intercept_[0]))
    _MODEL.clear()
    dev_scores = score([p[3] for p in dev_pages], out)  # the shipped (truncated) model
    groups = np.array([p[0] for p in dev_pages])
    genres = np.array([p[1] for p in dev_pages])
    ydev = np.array([p[2] for p in dev_pages])
    ordinary = np.isin(groups, ["web_pages", "c4", "wiki"])
    threshold = choose_threshold(dev_scores[ordinary])
    # the genre-only probe: chat vs prose on the training pages, scored on the dev safety labels
    probe = LogisticRegression(C=2.0, max_iter=3000).fit(x, np.array([p[1] == "chat" for p in train_pages]))
    probe_scores = probe.predict_proba(_transform(vec, [p[3] for p in dev_pages]))[:, 1]
    metrics = {
        "train_pages": {g: int(sum(1 for p in train_pages if p[0] == g)) for g in sorted({p[0] for p in train_pages})},
        "dev_pages": {g: int((groups == g).sum()) for g in sorted(set(groups))},
        "dev_auc": _auc(ydev, dev_scores),
        "dev_auc_chat_only": _auc(ydev[genres == "chat"], dev_scores[genres == "chat"]),
        "dev_auc_prose_only": _auc(ydev[genres == "prose"], dev_scores[genres == "prose"]),
        "dev_mean_score_safe_chat": float(dev_scores[(genres == "chat") & (ydev == 0)].mean()),
        "dev_mean_score_safe_prose": float(dev_scores[(genres == "prose") & (ydev == 0)].mean()),
        "genre_probe_auc_on_safety_labels": _auc(ydev, probe_scores),
        "dev_ordinary_false_drop_at_threshold": float((dev_scores[ordinary] > threshold).mean()),
        "dev_recall_at_threshold": {g: float((dev_scores[groups == g] > threshold).mean())
                                    for g in sorted(set(groups[ydev == 1]))},
        "dev_hard_false_drop_at_threshold": {g: float((dev_scores[groups == g] > threshold).mean())
                                             for g in safety_data.HARD if (groups == g).any()},
    }
    manifest = {
        "artifact": out.name, "kind": "page safety model (P(unsafe))",
        "training_data": safety_data.__doc__.strip(), "settings": settings,
        "threshold": threshold,
        "threshold_rule": (f"highest dev score of ordinary web text (web pages, C4, Wikipedia chunks of the dev split, "
                           f"{int(ordinary.sum())} pages) such that at most {BUDGET:.1%} score above it"),
        "metrics": metrics,
        "metrics_note": ("dev pages of the written groups (sexual, hate, ..., fiction) reuse the training sentences "
                         "(the file has train and eval sentences only), so their dev numbers are in-sample; the held-out "
                         "ones are dev_ordinary_*, redteam_chat and `cidermill eval data safety` (eval sentences, eval "
                         "documents). The filter uses this threshold only together with word evidence (web_safety_filter_v2)."),
        "command": "python -m corpus.web.safety_model train --data FOLDER",
    }
    out.with_suffix(".json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    _MODEL.clear()
    return manifest


def load(path: Path = MODEL_PATH) -> tuple[dict[str, float], frozenset, float]:
    path = Path(path)
    if path not in _MODEL:
        if not path.is_file():
            raise FileNotFoundError(f"safety model {path} not found; make it with "
                                    f"`python -m corpus.web.safety_model train --data FOLDER`")
        data = np.load(path)
        if "features" not in data or "coef" not in data:
            raise ValueError(f"safety model {path}: expected arrays 'features' and 'coef' (a page model of this module)")
        weights = dict(zip(data["features"].tolist(), data["coef"].astype(float).tolist()))
        firsts = frozenset(f.split(" ")[0] for f in weights if " " in f)
        _MODEL[path] = (weights, firsts, float(data["intercept"]))
    return _MODEL[path]


def threshold(path: Path = MODEL_PATH) -> float:
    """The threshold in the model's manifest (chosen from the false-drop budget)."""
    manifest = Path(path).with_suffix(".json")
    if not manifest.is_file():
        raise FileNotFoundError(f"{manifest}: the safety model's manifest is missing (it holds the threshold)")
    return float(json.loads(manifest.read_text(encoding="utf-8"))["threshold"])


def score_tokens(toks: list[str], path: Path = MODEL_PATH) -> float:
    weights, firsts, intercept = load(path)
    words = _words(toks)
    if not words:
        return 1.0 / (1.0 + math.exp(-intercept))
    uniq = set(words)
    z = sum([weights[w] for w in uniq & weights.keys()])
    pairs = {a + " " + b for a, b in zip(words, words[1:]) if a in firsts}  # only pairs the model weighs
    z += sum([weights[p] for p in pairs if p in weights])
    z = z / math.sqrt(len(uniq) + len(words) - 1 or 1) + intercept  # the scale of _norm
    return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))


def score(texts: list[str], path: Path = MODEL_PATH) -> np.ndarray:
    """P(unsafe) per text."""
    from . import safety_terms

    lex = safety_terms.load()
    return np.array([score_tokens(safety_terms.tokens(t or "", lex), path) for t in texts])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpus.web.safety_model")
    parser.add_argument("command", choices=["train"])
    parser.add_argument("--data", required=True, help="data folder with preference/, web_text/, web_extraction/")
    parser.add_argument("--out", default=str(MODEL_PATH))
    parser.add_argument("--cache", default=None, help="jsonl cache of the extracted web pages (made if missing)")
    args = parser.parse_args(argv)
    manifest = train(Path(args.data), Path(args.out), Path(args.cache) if args.cache else None)
    print(json.dumps(manifest["metrics"], indent=1))
    print(f"threshold {manifest['threshold']:.4f}; wrote {args.out} and its manifest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
