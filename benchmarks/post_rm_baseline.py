"""Reward-model held-out pairwise accuracy beside a bag-of-words baseline on the same pairs.

    PYTHONPATH=. .venv/bin/python benchmarks/post_rm_baseline.py RM_CHECKPOINT

RM_CHECKPOINT: a `train rm` checkpoint (e.g. `<root>/.runs/post-demo/demo-rm`, what `training.post_demo`
writes). Its config is re-read, so the held-out pairs are exactly the ones the RM never trained on (the same
seeded split). The baseline is a logistic regression on the difference of the chosen and rejected
responses' binary word-unigram vectors (scikit-learn; C chosen on a slice of the training pairs), trained
on the RM's training pairs (each pair once). Both are scored on the same held-out pairs; accuracies come
with Wilson 95% intervals, overall and per source. The baseline says how much lexical signal the pairs
carry; an RM below it has room to learn.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def bow_accuracy(train, valid, *, seed: int = 0) -> np.ndarray:
    """Per held-out pair: 1 if the baseline prefers the chosen response (0.5 on a tie)."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    vec = CountVectorizer(binary=True, min_df=2)
    vec.fit([it.pair.chosen for it in train] + [it.pair.rejected for it in train])

    def diff(items):
        return (vec.transform([it.pair.chosen for it in items]) - vec.transform([it.pair.rejected for it in items]))

    x = diff(train)
    # symmetric: (chosen - rejected, 1) and (rejected - chosen, 0); no intercept, so a tie is exactly 0
    xs, ys = _stack(x), np.r_[np.ones(x.shape[0]), np.zeros(x.shape[0])]
    n_dev = max(1, x.shape[0] // 5)
    best, best_acc = 1.0, -1.0
    for c in (0.01, 0.03, 0.1, 0.3, 1.0):  # C picked on the last fifth of the training pairs
        clf = LogisticRegression(C=c, max_iter=2000, fit_intercept=False)
        clf.fit(_stack(x[:-n_dev]), np.r_[np.ones(x.shape[0] - n_dev), np.zeros(x.shape[0] - n_dev)])
        acc = float(np.mean(clf.decision_function(x[-n_dev:]) > 0))
        if acc > best_acc:
            best, best_acc = c, acc
    clf = LogisticRegression(C=best, max_iter=2000, fit_intercept=False).fit(xs, ys)
    d = clf.decision_function(diff(valid))
    return np.where(d > 0, 1.0, np.where(d == 0, 0.5, 0.0))


def _stack(x):
    import scipy.sparse as sp

    return sp.vstack([x, -x]).tocsr()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("rm_checkpoint")
    args = p.parse_args()

    import torch

    from training import parallel
    from training.chat import load_tokenizer
    from training.pref_eval import wilson_interval
    from training.prefs import load_pairs, pair_batch
    from training.reward import load_reward_model

    model, cfg = load_reward_model(args.rm_checkpoint)
    tokenizer = load_tokenizer(cfg.tokenizer)
    train, valid, _ = load_pairs(cfg, tokenizer)
    unique = {id(it): it for it in train}  # weights > 1 repeat items; the baseline sees each pair once
    train = list(unique.values())
    deltas = []
    with torch.no_grad():
        for at in range(0, len(valid), 16):
            chunk = valid[at: at + 16]
            b = {k: v.to(parallel.device()) for k, v in pair_batch(chunk, cfg.seq_length, tokenizer.pad_id).items()}
            r, _ = model(b)
            deltas += (r[: len(chunk)] - r[len(chunk):]).tolist()
    rm = np.where(np.array(deltas) > 0, 1.0, np.where(np.array(deltas) == 0, 0.5, 0.0))
    bow = bow_accuracy(train, valid)
    sources = sorted({Path(it.pair.source).name for it in valid})
    print(f"held-out pairs: {len(valid)} (RM {cfg.name}, {cfg.steps} steps, pooling {cfg.rm.pooling}; "
          f"baseline trained on {len(train)} pairs)")
    print(f"{'source':36} {'pairs':>6} {'RM acc':>8} {'RM 95% CI':>16} {'BoW acc':>8} {'BoW 95% CI':>16} {'RM/BoW':>7}")
    for name, mask in [("all", np.ones(len(valid), bool))] + [
            (s, np.array([Path(it.pair.source).name == s for it in valid])) for s in sources]:
        n = int(mask.sum())
        a, b = rm[mask].mean(), bow[mask].mean()
        ra, rb = wilson_interval(rm[mask].sum(), n), wilson_interval(bow[mask].sum(), n)
        print(f"{name:36} {n:6d} {a:8.3f} [{ra[0]:.3f}, {ra[1]:.3f}]   {b:8.3f} [{rb[0]:.3f}, {rb[1]:.3f}]   "
              f"{a / b:7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
