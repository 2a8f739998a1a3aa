"""From per-sentence entailment scores to one summary score, and the shipped decision threshold.

Four aggregators of a summary's per-sentence best-window probabilities (consistency.py):
- `mean` and `min`: SummaC's zero-shot aggregations, nothing fitted;
- `fused` (shipped): the average of the zero-shot mean and the summary's lexical support score
  (entailment.py), nothing fitted but the threshold. Held out, it beats both of its parts on mean
  balanced accuracy (docs/synth.md): the two err on different summaries, and a fixed average has no
  weights to learn the training datasets' style;
- `learned`: a logistic regression over the mean, the minimum and the histogram of the sentences'
  scores (five equal bins of [0, 1], as shares of the summary's sentences), in the spirit of
  SummaC-Conv's learned layer over score histograms. Its eight numbers are fitted on development
  data only, each dataset weighing the same and, within a dataset, each label half (the objective
  then matches the mean balanced accuracy the threshold is chosen by).

`consistency_model.json` (beside this file) ships the aggregator, its threshold, the scorer settings
and the leave-one-dataset-out results; `cidermill eval data entailment --write-model` rebuilds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from synth.summaries.entailment import auc, balanced_accuracy, calibrate, read_model_json, write_model_json

MODEL_PATH = Path(__file__).with_name("consistency_model.json")
KINDS = ("mean", "min", "learned", "fused")
BINS = np.linspace(0.0, 1.0, 6)
FEATURES = ["mean", "min"] + [f"hist_{a:.1f}_{b:.1f}" for a, b in zip(BINS[:-1], BINS[1:])]
L2 = 1.0  # ridge penalty on the weights (not the bias) of the learned aggregator


def features(per_sentence: list[np.ndarray]) -> np.ndarray:
    """(summaries, 7): mean, min, and the share of sentences in each fifth of [0, 1]."""
    rows = []
    for s in per_sentence:
        s = np.clip(np.asarray(s, dtype=np.float64), 0.0, 1.0)
        hist = np.histogram(s, bins=BINS)[0] / max(1, len(s))
        rows.append([s.mean(), s.min(), *hist])
    return np.array(rows, dtype=np.float64).reshape(-1, len(FEATURES))


def fit_logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray, *, l2: float = L2, iters: int = 50):
    """Weighted L2 logistic regression by Newton's method: (coef, bias)."""
    xb = np.hstack([x, np.ones((len(x), 1))])
    beta = np.zeros(xb.shape[1])
    reg = np.full(xb.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(xb @ beta)))
        grad = xb.T @ (w * (p - y)) + reg * beta
        hess = (xb * (w * p * (1 - p))[:, None]).T @ xb + np.diag(reg) + 1e-9 * np.eye(len(beta))
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta[:-1], float(beta[-1])


def balanced_weights(labels: list[np.ndarray]) -> np.ndarray:
    """Per-row weights: every dataset sums to 1, split equally between its two labels."""
    out = []
    for y in labels:
        w = np.zeros(len(y))
        for v in (0, 1):
            m = y == v
            if m.any():
                w[m] = 0.5 / m.sum()
        out.append(w)
    return np.concatenate(out)


@dataclass
class Aggregator:
    kind: str = "learned"
    coef: list[float] = field(default_factory=list)
    bias: float = 0.0
    threshold: float = 0.5
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"aggregator kind must be one of {KINDS}; got {self.kind!r}")
        if self.kind == "learned" and len(self.coef) != len(FEATURES):
            raise ValueError(f"learned aggregator needs {len(FEATURES)} weights ({FEATURES}); got {len(self.coef)}")

    @property
    def needs_support(self) -> bool:
        return self.kind == "fused"

    def score(self, per_sentence: list[np.ndarray], support: np.ndarray | None = None) -> np.ndarray:
        """One score per summary; `support` (the lexical support scores of the same summaries) is needed by
        the `fused` kind only."""
        if self.needs_support and (support is None or len(support) != len(per_sentence)):
            raise ValueError(f"the fused aggregator needs the lexical support score of each of the "
                             f"{len(per_sentence)} summaries; got {None if support is None else len(support)}")
        if not per_sentence:
            return np.zeros(0)
        x = features(per_sentence)
        if self.kind == "fused":
            return (x[:, 0] + np.asarray(support, dtype=np.float64)) / 2
        if self.kind == "mean":
            return x[:, 0]
        if self.kind == "min":
            return x[:, 1]
        return 1.0 / (1.0 + np.exp(-(x @ np.asarray(self.coef) + self.bias)))

    def fit(self, per_sentence: list[list[np.ndarray]], labels: list[np.ndarray], groups: list[str],
            support: list[np.ndarray] | None = None) -> "Aggregator":
        """Fit the weights (learned only) and the threshold on these datasets; returns self. `support`: per
        dataset, the lexical support scores (fused only)."""
        if self.kind == "learned":
            x = np.vstack([features(p) for p in per_sentence])
            coef, self.bias = fit_logistic(x, np.concatenate(labels).astype(float), balanced_weights(labels))
            self.coef = [float(c) for c in coef]
        support = support if support is not None else [None] * len(per_sentence)
        self.threshold = calibrate([self.score(p, s) for p, s in zip(per_sentence, support)], labels, groups)
        return self

    def to_json(self) -> dict:
        return {"kind": self.kind, "features": FEATURES, "coef": self.coef, "bias": self.bias,
                "threshold": self.threshold, **self.info}

    @classmethod
    def from_json(cls, d: dict, path: Path = MODEL_PATH) -> "Aggregator":
        if d.get("kind") == "learned" and d.get("features") != FEATURES:
            raise ValueError(f"{path}: features {d.get('features')} do not match the code's {FEATURES}; rebuild it "
                             "with `cidermill eval data entailment --write-model`")
        info = {k: v for k, v in d.items() if k not in ("kind", "features", "coef", "bias", "threshold")}
        return cls(d["kind"], list(d.get("coef", [])), float(d.get("bias", 0.0)), float(d["threshold"]), info)


def leave_one_group_out(names: list[str], groups: list[str], per_sentence: list[list[np.ndarray]],
                        labels: list[np.ndarray], kind: str, support: list[np.ndarray] | None = None) -> list[dict]:
    """For each dataset: the aggregator (weights and threshold) fitted on the other groups, and its AUC and
    balanced accuracy on this one. `support`: per dataset, the lexical support scores (fused only)."""
    support = support if support is not None else [None] * len(names)
    rows = []
    for k, (name, group) in enumerate(zip(names, groups)):
        train = [i for i, g in enumerate(groups) if g != group]
        agg = Aggregator(kind, coef=[0.0] * len(FEATURES)).fit(
            [per_sentence[i] for i in train], [labels[i] for i in train], [groups[i] for i in train],
            [support[i] for i in train])
        s, y = agg.score(per_sentence[k], support[k]), labels[k]
        rows.append({"dataset": name, "n": int(len(y)), "n_consistent": int(y.sum()), "auc": auc(y, s),
                     "threshold": agg.threshold, "balanced_acc": balanced_accuracy(y, (s >= agg.threshold).astype(int))})
    return rows


def save(agg: Aggregator, path: Path = MODEL_PATH) -> None:
    write_model_json(path, agg.to_json())


def load(path: Path = MODEL_PATH) -> Aggregator:
    return Aggregator.from_json(read_model_json(path), path)
