"""The safety scorer's model: hashed word 1-2-grams -> logistic regression, trained by the project.

Training data (all real; a data folder in the layout of the project's shared data, given explicitly:
`python -m corpus.web.safety_model train --data FOLDER`; the files are under FOLDER/preference and
FOLDER/web_text):
- unsafe (1): the human turns of Anthropic's hh-rlhf harmless-base test dialogues (2,312 red-team
  conversations: people trying to get help with violence, theft, drugs, abuse, slurs, sex).
- safe (0): benign requests and prose in the same conversational register, so that the model
  learns the topic rather than "a question": the 805 AlpacaEval instructions and their reference
  answers, the 300 LLaMA-Factory DPO demo prompts; plus web and encyclopedia prose: paragraphs of
  the 300 C4 documents and of the Wikipedia sample.
What it is: a detector of requests for or talk of harm, sex and abuse. It is weakly supervised (a
red-team prompt is not always harmful) and English only; scores are a column, the threshold is
the filter's, so a better model can replace it without touching the pipeline.

The saved artifact is a small .npz (weights + settings, no pickle): corpus/web/models/safety_linear_v1.npz.
Scoring needs only numpy and scikit-learn's stateless HashingVectorizer.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import sys
from pathlib import Path

import numpy as np

MODEL_PATH = Path(__file__).resolve().parent / "models" / "safety_linear_v1.npz"
N_FEATURES = 1 << 16
_MODEL = None


def vectorizer():
    from sklearn.feature_extraction.text import HashingVectorizer

    return HashingVectorizer(n_features=N_FEATURES, ngram_range=(1, 2), alternate_sign=False,
                             norm="l2", lowercase=True, token_pattern=r"(?u)\b\w+\b")


def _paragraphs(text: str, min_chars: int = 80) -> list[str]:
    return [p.strip() for p in re.split(r"\n+", text) if len(p.strip()) >= min_chars]


def training_set(root: Path) -> tuple[list[str], np.ndarray]:
    root = Path(root)
    unsafe, safe = [], []
    with gzip.open(root / "preference" / "hh_rlhf" / "harmless-base_test.jsonl.gz", "rt") as f:
        for line in f:
            dialogue = json.loads(line)["chosen"]
            turns = re.findall(r"Human: (.*?)(?=\n\nAssistant:|\Z)", dialogue, flags=re.S)
            unsafe.append(" ".join(t.strip() for t in turns))
    for item in json.loads((root / "preference" / "alpaca_eval_weighted" / "alpaca-7b.annotations.json").read_text()):
        safe.append(item["instruction"])
        safe.extend(_paragraphs(item["output_1"])[:3])
    for item in json.loads((root / "preference" / "llamafactory_demo" / "dpo_en_demo.json").read_text()):
        safe.append(item["conversations"][0]["value"])
    with open(root / "web_text" / "llamafactory_demo" / "c4_demo.jsonl") as f:
        for line in f:
            safe.extend(_paragraphs(json.loads(line)["text"])[:6])
    for line in (root / "web_text" / "llamafactory_demo" / "wiki_demo.txt").read_text().splitlines():
        safe.extend(_paragraphs(line)[:20])
    texts = unsafe + safe
    return texts, np.array([1] * len(unsafe) + [0] * len(safe), np.int8)


def _is_test(text: str) -> bool:
    return hashlib.blake2b(text.encode(), digest_size=2).digest()[0] < 52  # ~20%, by content


def train(out: Path, root: Path) -> dict:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    texts, labels = training_set(root)
    test = np.array([_is_test(t) for t in texts])
    x = vectorizer().transform(texts)
    model = LogisticRegression(C=4.0, max_iter=2000, class_weight="balanced")
    model.fit(x[~test], labels[~test])
    held_out = model.predict_proba(x[test])[:, 1]
    metrics = {"train_rows": int((~test).sum()), "test_rows": int(test.sum()),
               "unsafe_rows": int(labels.sum()), "safe_rows": int(len(labels) - labels.sum()),
               "test_auc": float(roc_auc_score(labels[test], held_out)),
               "test_accuracy_at_0.5": float(((held_out >= 0.5) == labels[test]).mean())}
    model.fit(x, labels)  # the shipped model uses every row; the metrics above are held out
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, coef=model.coef_[0].astype(np.float32), intercept=np.float32(model.intercept_[0]),
                        n_features=N_FEATURES, metrics=json.dumps(metrics))
    return metrics


def load(path: Path = MODEL_PATH) -> tuple[np.ndarray, float]:
    global _MODEL
    if _MODEL is None or _MODEL[0] != path:
        if not Path(path).is_file():
            raise FileNotFoundError(f"safety model {path} not found; make it with `python -m corpus.web.safety_model train --data FOLDER`")
        data = np.load(path)
        if int(data["n_features"]) != N_FEATURES:
            raise ValueError(f"safety model {path} has {int(data['n_features'])} features, expected {N_FEATURES}")
        _MODEL = (path, data["coef"].astype(np.float64), float(data["intercept"]))
    return _MODEL[1], _MODEL[2]


def score(texts: list[str], path: Path = MODEL_PATH, max_chars: int = 20000) -> np.ndarray:
    """P(unsafe) per text, from the first `max_chars` characters."""
    coef, intercept = load(path)
    x = vectorizer().transform([(t or "")[:max_chars] for t in texts])
    return 1.0 / (1.0 + np.exp(-(x @ coef + intercept)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpus.web.safety_model")
    parser.add_argument("command", choices=["train"])
    parser.add_argument("--out", default=str(MODEL_PATH))
    parser.add_argument("--data", required=True, help="data folder holding preference/ and web_text/ (see training_set)")
    args = parser.parse_args(argv)
    metrics = train(Path(args.out), Path(args.data))
    print(json.dumps(metrics, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
