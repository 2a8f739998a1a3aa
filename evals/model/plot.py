"""PNG of a run's checkpoints across its stages: held-out loss (from each checkpoint's manifest) and the
headline score of every task, one point per evaluated checkpoint, in training order."""

from __future__ import annotations

from pathlib import Path

HEADLINE = ("acc", "exact_match", "prompt_level_strict", "ast_overall", "pass@1", "good_rate", "score")


def headline_metric(metrics: dict) -> tuple[str, float] | None:
    for key in HEADLINE:
        if isinstance(metrics.get(key), (int, float)):
            return key, float(metrics[key])
    return None


def plot_stages(results: list[dict], out: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['model'].get('stage') or '?'}\nstep {r['model'].get('step', '?')}" for r in results]
    x = list(range(len(results)))
    fig, (ax_loss, ax_score) = plt.subplots(1, 2, figsize=(12, 4.5))
    losses = [r["model"].get("eval_loss") for r in results]
    ax_loss.plot([i for i, v in zip(x, losses) if v is not None], [v for v in losses if v is not None], "o-")
    ax_loss.set_title("held-out loss per checkpoint")
    ax_loss.set_xticks(x, labels)
    tasks = sorted({t for r in results for t in r["tasks"]})
    for task in tasks:
        pts = [(i, headline_metric(r["tasks"][task]["metrics"])) for i, r in zip(x, results) if task in r["tasks"]]
        pts = [(i, h) for i, h in pts if h is not None]
        if pts:
            ax_score.plot([i for i, _ in pts], [h[1] for _, h in pts], "o-", label=f"{task} ({pts[0][1][0]})")
    ax_score.set_title("task scores per checkpoint")
    ax_score.set_xticks(x, labels)
    ax_score.set_ylim(-0.02, 1.02)
    ax_score.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
