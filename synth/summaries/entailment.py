"""The entailment scorer: logistic regression over lexical consistency features, trained and its
threshold calibrated on SummaC's labelled subsets (FactCC, SummEval, XSumFaith, Polytope).

Train/held-out split is by document (a document's summaries never straddle the split), stratified
per subset with a fixed seed. The threshold maximises balanced accuracy on the training part; the
held-out balanced accuracy is what we report, next to a length-only baseline trained the same way.
The fitted weights are small and saved as JSON beside this file (entailment_model.json: weights,
threshold, the training data and settings, held-out numbers), so the stage needs neither the data
nor scikit-learn at run time. Reproduce it from SummaC's subsets, given explicitly:

    python -m synth.summaries.entailment /path/to/summac_subsets
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .features import FEATURE_NAMES, feature_matrix

MODEL_PATH = Path(__file__).with_name("entailment_model.json")
SUBSETS = ("factcc", "summeval", "xsumfaith", "polytope")


@dataclass
class SummacRow:
    subset: str
    document: str
    summary: str
    label: int  # 1 = consistent


def load_summac(folder: str | Path) -> list[SummacRow]:
    rows = []
    for name in SUBSETS:
        path = Path(folder) / f"{name}.json"
        data = json.loads(path.read_text(encoding="utf-8"))
        for key, rec in data.items():
            if rec.get("label") not in (0, 1):
                raise ValueError(f"{path}: record {key} has label {rec.get('label')!r}; expected 0 or 1")
            rows.append(SummacRow(name, rec["document"], rec["claim"], int(rec["label"])))
    return rows


def split_by_document(rows: list[SummacRow], *, held_out: float = 0.3, seed: int = 0) -> tuple[list[int], list[int]]:
    train, test = [], []
    for i, r in enumerate(rows):
        h = int(hashlib.sha256(f"{seed}:{r.subset}:{r.document[:500]}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        (test if h < held_out else train).append(i)
    return train, test


def balanced_accuracy(y: np.ndarray, pred: np.ndarray) -> float:
    tpr = float(np.mean(pred[y == 1] == 1)) if np.any(y == 1) else 0.0
    tnr = float(np.mean(pred[y == 0] == 0)) if np.any(y == 0) else 0.0
    return (tpr + tnr) / 2


def best_threshold(y: np.ndarray, scores: np.ndarray) -> float:
    cands = np.unique(scores)
    accs = [balanced_accuracy(y, (scores >= t).astype(int)) for t in cands]
    return float(cands[int(np.argmax(accs))])


@dataclass
class LinearScorer:
    names: list[str]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    threshold: float

    def score(self, x: np.ndarray) -> np.ndarray:
        z = ((x - self.mean) / self.scale) @ self.coef + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    def to_json(self) -> dict:
        return {"features": self.names, "mean": self.mean.tolist(), "scale": self.scale.tolist(),
                "coef": self.coef.tolist(), "intercept": self.intercept, "threshold": self.threshold}

    @classmethod
    def from_json(cls, d: dict) -> "LinearScorer":
        return cls(d["features"], np.array(d["mean"]), np.array(d["scale"]), np.array(d["coef"]),
                   float(d["intercept"]), float(d["threshold"]))


def fit(x: np.ndarray, y: np.ndarray, names: list[str]) -> LinearScorer:
    from sklearn.linear_model import LogisticRegression

    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-9
    clf = LogisticRegression(class_weight="balanced", C=1.0, max_iter=2000).fit((x - mean) / scale, y)
    scorer = LinearScorer(names, mean, scale, clf.coef_[0], float(clf.intercept_[0]), 0.5)
    scorer.threshold = best_threshold(y, scorer.score(x))
    return scorer


def evaluate(folder: str | Path, *, seed: int = 0) -> dict:
    """Train on the train split, report held-out balanced accuracy for ours and the length baseline."""
    rows = load_summac(folder)
    x = feature_matrix([r.document for r in rows], [r.summary for r in rows])
    y = np.array([r.label for r in rows])
    tr, te = split_by_document(rows, seed=seed)
    ours = fit(x[tr], y[tr], FEATURE_NAMES)
    length_col = [FEATURE_NAMES.index("log_summary_words")]
    base = fit(x[tr][:, length_col], y[tr], ["log_summary_words"])
    out = {"n_train": len(tr), "n_heldout": len(te), "model": ours, "per_subset": []}
    for name in ("all", *SUBSETS):
        idx = np.array([i for i in te if name == "all" or rows[i].subset == name])
        if idx.size == 0:
            continue
        p_ours = (ours.score(x[idx]) >= ours.threshold).astype(int)
        p_base = (base.score(x[idx][:, length_col]) >= base.threshold).astype(int)
        out["per_subset"].append({
            "subset": name, "n": int(idx.size), "n_consistent": int(y[idx].sum()),
            "balanced_acc_ours": balanced_accuracy(y[idx], p_ours),
            "balanced_acc_length_only": balanced_accuracy(y[idx], p_base),
        })
    return out


def train_and_save(folder: str | Path, path: Path = MODEL_PATH, *, seed: int = 0) -> dict:
    """Fit on the train split (the held-out part stays unseen) and save the weights."""
    result = evaluate(folder, seed=seed)
    files = {name: hashlib.sha256((Path(folder) / f"{name}.json").read_bytes()).hexdigest() for name in SUBSETS}
    payload = {**result["model"].to_json(), "trained_on": "summac_subsets train split (by document, seed "
               f"{seed}, 70%)", "training_data": {"source": "SummaC benchmark labelled subsets (Laban et al. 2022): "
                                                  "<folder>/<subset>.json", "sha256": files,
                                                  "n_train": result["n_train"], "n_heldout": result["n_heldout"]},
               "settings": {"model": "LogisticRegression", "C": 1.0, "class_weight": "balanced", "max_iter": 2000,
                            "features": "standardised (mean/scale above)", "threshold": "max balanced accuracy on train",
                            "split": "by document, sha256(seed:subset:document[:500]), 30% held out", "seed": seed},
               "made_by": "python -m synth.summaries.entailment <summac_subsets folder>",
               "heldout": result["per_subset"]}
    path.write_text(json.dumps(payload, indent=1) + "\n")
    return result


def load_scorer(path: Path = MODEL_PATH) -> LinearScorer:
    if not path.exists():
        raise FileNotFoundError(f"{path} missing; run `python -m synth.summaries.entailment <summac folder>`")
    return LinearScorer.from_json(json.loads(path.read_text()))


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m synth.summaries.entailment",
                                 description="train the entailment scorer and write entailment_model.json")
    ap.add_argument("folder", help="SummaC subsets folder (factcc.json, summeval.json, xsumfaith.json, polytope.json)")
    ap.add_argument("--out", default=str(MODEL_PATH))
    args = ap.parse_args()
    res = train_and_save(args.folder, Path(args.out))
    for r in res["per_subset"]:
        print(r)
