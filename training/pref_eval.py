"""Held-out figures of a pairwise preference model, per preference level: accuracy and calibration.

`pairwise_report(deltas, levels, level_probs)`: Δ = r(chosen) − r(rejected) per pair, the pair's level k
and the target probabilities p_k. Per level: pairs, accuracy (Δ > 0; Δ = 0 counts one half), mean σ(Δ),
and the expected calibration error of σ(Δ) against p_k: σ(Δ) binned into `bins` equal-width bins,
ECE = Σ_b (n_b / n)·|mean σ(Δ) in b − p_k|. Overall accuracy comes with its Wilson 95% interval
(`accuracy_ci95`), so a held-out figure near 0.5 on a few hundred pairs is read as what it is.
Callable by `eval model --tasks preference`.
"""

from __future__ import annotations

import math
from typing import Sequence


def pairwise_report(deltas: Sequence[float], levels: Sequence[int], level_probs: Sequence[float], *,
                    bins: int = 10) -> dict:
    if len(deltas) != len(levels):
        raise ValueError(f"pairwise_report: {len(deltas)} deltas but {len(levels)} levels")
    out = {"levels": {}, "pairs": len(deltas)}
    correct_all = 0.0
    for k, p in enumerate(level_probs):
        ds = [float(d) for d, lv in zip(deltas, levels) if lv == k]
        if not ds:
            continue
        probs = [1 / (1 + math.exp(-d)) for d in ds]
        correct = sum(1.0 if d > 0 else 0.5 if d == 0 else 0.0 for d in ds)
        correct_all += correct
        by_bin: dict[int, list[float]] = {}
        for q in probs:
            by_bin.setdefault(min(int(q * bins), bins - 1), []).append(q)
        ece = sum(len(v) / len(probs) * abs(sum(v) / len(v) - p) for v in by_bin.values())
        out["levels"][k] = {"target_p": p, "pairs": len(ds), "accuracy": correct / len(ds),
                            "mean_prob": sum(probs) / len(probs), "ece": ece}
    out["accuracy"] = correct_all / max(len(deltas), 1)
    out["accuracy_ci95"] = wilson_interval(correct_all, len(deltas))
    return out


def wilson_interval(successes: float, n: int, *, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a proportion (successes may be fractional: ties count one half)."""
    if n == 0:
        return (0.0, 1.0)
    phat = successes / n
    centre = (phat + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def format_report(report: dict) -> str:
    lines = [f"{'level':>5} {'p':>5} {'pairs':>6} {'accuracy':>9} {'mean σ(Δ)':>10} {'ECE':>6}"]
    for k, r in sorted(report["levels"].items()):
        lines.append(f"{k:>5} {r['target_p']:>5.2f} {r['pairs']:>6} {r['accuracy']:>9.3f} {r['mean_prob']:>10.3f} "
                     f"{r['ece']:>6.3f}")
    lo, hi = report.get("accuracy_ci95", (float("nan"), float("nan")))
    lines.append(f"{'all':>5} {'':>5} {report['pairs']:>6} {report['accuracy']:>9.3f}   95% CI [{lo:.3f}, {hi:.3f}]")
    return "\n".join(lines)
