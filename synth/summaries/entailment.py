"""The summary entailment scorer: the mean of three support ratios (features.py), and a threshold.

Why an unweighted mean and not a trained model: a logistic regression fitted on SummaC's subsets
learned which subset a pair came from (summary length, counts of novel words) and fell to chance on
news summaries from other annotation efforts. Fitted leave-one-dataset-out, weights did no better than
equal weights on the held-out dataset, so the score has no fitted weights at all; only the
threshold is learnt, by the mean over datasets of each dataset's balanced accuracy (equal weight per
dataset, whatever its size or base rate).

The artifact `entailment_model.json` (beside this file) holds the features, the threshold, what it
was calibrated on and the leave-one-dataset-out results; `cidermill eval data entailment
--write-model` rebuilds it from the labelled data. The stage needs neither the data nor
scikit-learn at run time.

An optional LLM judge (`llm_judge`) asks, for each summary sentence, whether the document supports
it, and averages the yes answers with the support score.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from synth.backends import SamplingParams
from synth.generation.template import PromptTemplate

from synth.summaries.features import FEATURE_NAMES, feature_matrix, sentences

MODEL_PATH = Path(__file__).with_name("entailment_model.json")


@dataclass
class Labelled:
    """One labelled dataset: documents, summaries, labels (1 = consistent) and a group name; datasets
    of one group share documents (XSumFaith and the XSum hallucination annotations) and are held out
    together."""

    name: str
    documents: list[str]
    summaries: list[str]
    labels: np.ndarray
    group: str = ""

    def __post_init__(self):
        self.group = self.group or self.name


def balanced_accuracy(y: np.ndarray, pred: np.ndarray) -> float:
    tpr = float(np.mean(pred[y == 1] == 1)) if np.any(y == 1) else 0.0
    tnr = float(np.mean(pred[y == 0] == 0)) if np.any(y == 0) else 0.0
    return (tpr + tnr) / 2


def auc(y: np.ndarray, score: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney U with tied ranks averaged)."""
    y, score = np.asarray(y), np.asarray(score, dtype=np.float64)
    n1, n0 = int((y == 1).sum()), int((y == 0).sum())
    if not n1 or not n0:
        return float("nan")
    order = np.argsort(score, kind="mergesort")
    ranks = np.empty(len(score))
    sorted_scores = score[order]
    i = 0
    while i < len(score):  # average ranks over ties
        j = i
        while j + 1 < len(score) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[y == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def calibrate(scores: list[np.ndarray], labels: list[np.ndarray], groups: list[str]) -> float:
    """The threshold maximising the mean over groups of the mean balanced accuracy of their datasets."""
    cands = np.unique(np.round(np.concatenate(scores), 4))
    best, best_t = -1.0, 0.5
    for t in cands:
        per_group: dict[str, list[float]] = {}
        for s, y, g in zip(scores, labels, groups):
            per_group.setdefault(g, []).append(balanced_accuracy(y, (s >= t).astype(int)))
        v = float(np.mean([np.mean(b) for b in per_group.values()]))
        if v > best:
            best, best_t = v, float(t)
    return best_t


@dataclass
class SupportScorer:
    features: list[str] = field(default_factory=lambda: list(FEATURE_NAMES))
    threshold: float = 0.85
    info: dict = field(default_factory=dict)

    def score(self, x: np.ndarray) -> np.ndarray:
        if list(self.features) != FEATURE_NAMES:
            raise ValueError(f"{MODEL_PATH}: features {self.features} do not match the code's {FEATURE_NAMES}; "
                             "rebuild it with `cidermill eval data entailment --write-model`")
        return x.mean(axis=1) if len(x) else np.zeros(0)

    def score_pairs(self, documents: list[str], summaries: list[str]) -> np.ndarray:
        return self.score(feature_matrix(documents, summaries))

    def to_json(self) -> dict:
        return {"kind": "support_mean_v2", "features": self.features, "threshold": self.threshold, **self.info}

    @classmethod
    def from_json(cls, d: dict) -> "SupportScorer":
        if d.get("kind") != "support_mean_v2":
            raise ValueError(f"{MODEL_PATH}: unknown scorer kind {d.get('kind')!r}; expected 'support_mean_v2'")
        info = {k: v for k, v in d.items() if k not in ("kind", "features", "threshold")}
        return cls(list(d["features"]), float(d["threshold"]), info)


def leave_one_dataset_out(datasets: list[Labelled], score_fn) -> list[dict]:
    """For each dataset: the threshold calibrated on the other groups, and AUC / balanced accuracy on it.

    `score_fn(dataset) -> np.ndarray` gives the scores of one dataset (computed once per dataset)."""
    scores = {d.name: np.asarray(score_fn(d), dtype=np.float64) for d in datasets}
    rows = []
    for held in datasets:
        train = [d for d in datasets if d.group != held.group]
        t = calibrate([scores[d.name] for d in train], [d.labels for d in train], [d.group for d in train])
        s, y = scores[held.name], held.labels
        rows.append({"dataset": held.name, "n": int(len(y)), "n_consistent": int(y.sum()),
                     "auc": auc(y, s), "threshold": t, "balanced_acc": balanced_accuracy(y, (s >= t).astype(int))})
    return rows


def fit_scorer(datasets: list[Labelled]) -> tuple[SupportScorer, dict]:
    """Calibrate the shipped threshold on every dataset; return the scorer and its evaluation."""
    scorer = SupportScorer()
    feats = {d.name: feature_matrix(d.documents, d.summaries) for d in datasets}
    scores = {n: scorer.score(x) for n, x in feats.items()}
    scorer.threshold = calibrate([scores[d.name] for d in datasets], [d.labels for d in datasets],
                                 [d.group for d in datasets])
    lodo = leave_one_dataset_out(datasets, lambda d: scores[d.name])
    shipped = [{"dataset": d.name, "balanced_acc": balanced_accuracy(d.labels, (scores[d.name] >= scorer.threshold).astype(int))}
               for d in datasets]
    scorer.info = {"calibrated_on": [{"dataset": d.name, "group": d.group, "n": len(d.labels),
                                      "n_consistent": int(d.labels.sum())} for d in datasets],
                   "calibration": "threshold maximising the mean over dataset groups of balanced accuracy",
                   "leave_one_dataset_out": lodo, "balanced_acc_at_threshold": shipped}
    return scorer, {"lodo": lodo, "shipped": shipped}


def write_model_json(path: Path, obj: dict) -> None:
    """Write a shipped model file whole or not at all (a temp name, then a rename)."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    tmp.replace(path)


def read_model_json(path: Path) -> dict:
    if not path.exists():
        raise FileNotFoundError(f"{path} missing; rebuild it with `cidermill eval data entailment --write-model`")
    return json.loads(path.read_text())


def save_scorer(scorer: SupportScorer, path: Path = MODEL_PATH) -> None:
    write_model_json(path, scorer.to_json())


def load_scorer(path: Path = MODEL_PATH) -> SupportScorer:
    return SupportScorer.from_json(read_model_json(path))


# --- calibrating the threshold on a user's own labelled pairs ----------------------------------------

def read_labelled_pairs(path: str | Path) -> tuple[list[str], list[str], np.ndarray]:
    """Documents, summaries and labels from JSON lines `{"document" (or "payload"), "summary", "label"}`,
    label 1 = the summary is consistent with its document, 0 = not. Blank lines are skipped; any other bad
    line stops the read with a RecordError naming the file, the line and the reason."""
    from manifests.errors import RecordError, ShardError

    path = Path(path)
    documents, summaries, labels = [], [], []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ShardError(str(path), f"cannot read labelled pairs: {exc}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecordError(str(path), f"line {n}", f"not JSON ({exc.msg})") from None
        if not isinstance(rec, dict):
            raise RecordError(str(path), f"line {n}", f"expected a JSON object, got {type(rec).__name__}")
        doc = rec.get("document", rec.get("payload"))
        for key, value in (("document (or payload)", doc), ("summary", rec.get("summary"))):
            if not isinstance(value, str) or not value.strip():
                raise RecordError(str(path), f"line {n}", f"{key} must be a non-empty string; got {value!r:.60}")
        label = rec.get("label")
        if isinstance(label, bool) or label not in (0, 1):
            raise RecordError(str(path), f"line {n}", f"label must be 1 (consistent) or 0 (not); got {label!r}")
        documents.append(doc)
        summaries.append(rec["summary"])
        labels.append(int(label))
    return documents, summaries, np.array(labels, dtype=np.int64)


def _fold_of(key: str, folds: int) -> int:
    import hashlib

    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % folds


def calibrate_on_pairs(scores: np.ndarray, labels: np.ndarray, documents: list[str], *, folds: int = 5,
                       shipped_threshold: float) -> dict:
    """The threshold maximising balanced accuracy on these pairs, and an honest estimate of what it gives
    on pairs like them: out-of-fold predictions, each pair judged by the threshold calibrated on the folds
    that do not hold its document (pairs of one document stay in one fold, chosen by a hash of its
    text, so the split is the same on every run)."""
    from manifests.errors import ConfigError

    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels)
    n1, n0 = int((labels == 1).sum()), int((labels == 0).sum())
    if folds < 2:
        raise ConfigError(f"--folds must be at least 2; got {folds}")
    if n1 < folds or n0 < folds:
        raise ConfigError(f"calibration needs at least {folds} consistent and {folds} inconsistent pairs "
                          f"(as many of each as --folds); got {n1} and {n0}. Label more pairs or lower --folds")
    fold = np.array([_fold_of(d, folds) for d in documents])
    oof = np.zeros(len(labels), dtype=np.int64)
    fold_thresholds = []
    for k in range(folds):
        test = fold == k
        if not test.any():
            continue
        train = ~test
        if len(set(labels[train].tolist())) < 2:
            raise ConfigError(f"fold {k}: the pairs outside it have fewer than two labels; folds are split by "
                              "document, so label pairs from more documents or lower --folds")
        t = calibrate([scores[train]], [labels[train]], ["pairs"])
        fold_thresholds.append(t)
        oof[test] = scores[test] >= t
    threshold = calibrate([scores], [labels], ["pairs"])
    return {"n": int(len(labels)), "n_consistent": n1, "auc": auc(labels, scores), "folds": folds,
            "threshold": threshold,
            "balanced_acc_in_sample": balanced_accuracy(labels, (scores >= threshold).astype(int)),
            "balanced_acc_cross_validated": balanced_accuracy(labels, oof),
            "fold_thresholds": fold_thresholds,
            "shipped_threshold": shipped_threshold,
            "balanced_acc_at_shipped": balanced_accuracy(labels, (scores >= shipped_threshold).astype(int)),
            "kept_at_shipped": float(np.mean(scores >= shipped_threshold)),
            "kept_at_threshold": float(np.mean(scores >= threshold))}


# --- the LLM judge ----------------------------------------------------------------------------------

JUDGE = PromptTemplate(
    id="summary_support_judge", version="v1",
    system="You check summaries against their source. Answer with one word, yes or no: yes only if the "
           "source states or directly implies the sentence; no if the sentence adds, changes or "
           "contradicts anything.",
    user="Source:\n{document}\n\nSentence:\n{sentence}\n\nDoes the source support the sentence? Answer yes or no.",
)
_YES = re.compile(r"^\W*(yes|supported)\b", re.I)


def judge_scores(backend, documents: list[str], summaries: list[str], *, max_tokens: int = 3) -> np.ndarray:
    """Share of each summary's sentences the LLM says the document supports (any answer but yes = no)."""
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0)
    reqs, owner = [], []
    for i, (doc, summ) in enumerate(zip(documents, summaries)):
        for sent in sentences(summ) or [summ]:
            reqs.append(JUDGE.request(params, document=doc, sentence=sent))
            owner.append(i)
    yes, total = np.zeros(len(documents)), np.zeros(len(documents))
    for i, resp in zip(owner, backend.generate(reqs) if reqs else []):
        total[i] += 1
        yes[i] += bool(_YES.match(resp.text or ""))
    return np.divide(yes, total, out=np.zeros_like(yes), where=total > 0)
