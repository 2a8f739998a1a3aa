"""Mixture-ratio ablations (AFM report 4.2, "tuning the mixture ratio"): nudge one weight at a time,
train a short proxy model on each variant, and see which nudges help.

Variants of a base mixture: for each component i, w_i * (1 + delta) and w_i * (1 - delta) (or
w_i +/- delta with `absolute=True`), floored at 0 and renormalised. Each variant is published as a
mixture version `<base>.abl-<component>-<plus|minus>`, so a trainer reads it like any mixture.

The runner fills a command template per run (the base included) and runs it; the command writes a
JSON of scores (`{"metric": number, ...}`, or `{"scores": {...}}`) to `{out}/scores.json`.
Placeholders: {mixture} (the variant's mixture.json), {mixture_ref} (its catalog ref), {name},
{out} (the run's directory), {root} (data root), {seed}, {python} (this interpreter). A run with scores already there is not
redone, so an interrupted ablation resumes. Higher scores are taken as better unless
`lower_is_better` names the metric (e.g. loss, perplexity).
"""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field

from manifests import Catalog
from manifests.errors import ConfigError, FatalError
from manifests.mixture import MixtureManifest

log = logging.getLogger("cidermill.ablate")
SCORES_FILE = "scores.json"


@dataclass(frozen=True)
class Variant:
    name: str
    component: str | None  # None: the base mixture
    direction: str  # "plus" | "minus" | "base"
    weights: dict[str, float]


@dataclass
class RunResult:
    variant: Variant
    mixture_path: str
    out_dir: str
    scores: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    resumed: bool = False


def make_variants(base: MixtureManifest, delta: float, *, absolute: bool = False,
                  components: list[str] | None = None) -> list[Variant]:
    """The base plus, per component, one variant up and one down (renormalised)."""
    if not 0 < delta < (1.0 if absolute else 10.0):
        raise ConfigError(f"ablate: delta must be in (0, {1 if absolute else 10}); got {delta}")
    names = [c.name for c in base.components]
    chosen = components or names
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        raise ConfigError(f"ablate: no component(s) {unknown} in mixture {base.name} (it has {names})")
    weights = {c.name: c.weight for c in base.components}
    out = [Variant(name=base.name, component=None, direction="base", weights=dict(weights))]
    for comp in chosen:
        for direction, sign in (("plus", 1.0), ("minus", -1.0)):
            w = dict(weights)
            w[comp] = max(0.0, w[comp] + sign * delta) if absolute else w[comp] * (1.0 + sign * delta)
            total = sum(w.values())
            if total <= 0:
                continue
            w = {k: v / total for k, v in w.items()}
            if all(math.isclose(w[k], weights[k], abs_tol=1e-12) for k in w):
                log.warning("ablate: %s %s leaves the mixture unchanged (weight 0?); skipped", comp, direction)
                continue
            out.append(Variant(name=f"{base.name}.abl-{comp}-{direction}", component=comp,
                               direction=direction, weights=w))
    return out


def _fill(template: str, values: dict[str, str]) -> list[str]:
    # Split first, then fill: a path with spaces stays one argument.
    try:
        return [part.format(**values) for part in shlex.split(template)]
    except KeyError as exc:
        raise ConfigError(f"ablate: unknown placeholder {{{exc.args[0]}}} in the command; "
                          f"use {', '.join('{' + k + '}' for k in values)}") from exc


def read_scores(path: str) -> dict[str, float]:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if isinstance(data, dict) and isinstance(data.get("scores"), dict):
        data = data["scores"]
    if not isinstance(data, dict):
        raise FatalError(f"{path}: expected a JSON object of metric -> number")
    scores = {k: float(v) for k, v in data.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if not scores:
        raise FatalError(f"{path}: no numeric scores in it")
    return scores


def run_ablation(catalog: Catalog, base: MixtureManifest, variants: list[Variant], command: str, out_dir: str,
                 *, timeout_s: float | None = None) -> list[RunResult]:
    """Publish each variant, run `command` for it (skipping runs already scored), collect scores."""
    os.makedirs(out_dir, exist_ok=True)
    results = []
    for v in variants:
        mixture = base if v.direction == "base" else base.with_weights(v.weights, name=v.name, stage="ablation")
        path = mixture.publish(catalog)
        run_dir = os.path.join(out_dir, v.name)
        os.makedirs(run_dir, exist_ok=True)
        result = RunResult(variant=v, mixture_path=path.uri, out_dir=run_dir)
        scores_path = os.path.join(run_dir, SCORES_FILE)
        stamp = os.path.join(run_dir, "mixture.sha256")
        mixture_sha = path.path.rsplit("/", 2)[-2]  # <root>/<name>/<version id>/mixture.json
        if os.path.exists(scores_path) and os.path.exists(stamp) and open(stamp).read().strip() == mixture_sha:
            result.scores, result.resumed = read_scores(scores_path), True
            results.append(result)
            continue
        argv = _fill(command, {"mixture": path.uri, "mixture_ref": f"{v.name}@{mixture_sha[:12]}", "name": v.name,
                               "out": run_dir, "root": catalog.root.uri, "seed": str(base.seed),
                               "python": sys.executable})
        log.info("ablate: running %s", " ".join(shlex.quote(a) for a in argv))
        start = time.perf_counter()
        with open(os.path.join(run_dir, "run.log"), "wb") as logf:
            try:
                proc = subprocess.run(argv, stdout=logf, stderr=subprocess.STDOUT, timeout=timeout_s)
            except FileNotFoundError as exc:
                raise ConfigError(f"ablate: cannot run {argv[0]!r} ({exc.strerror})") from exc
            except subprocess.TimeoutExpired as exc:
                raise FatalError(f"ablate: {v.name} ran past {timeout_s} s; see {logf.name}") from exc
        result.seconds = time.perf_counter() - start
        if proc.returncode != 0:
            raise FatalError(f"ablate: the command failed for {v.name} (exit {proc.returncode}); "
                             f"see {os.path.join(run_dir, 'run.log')}")
        if not os.path.exists(scores_path):
            raise FatalError(f"ablate: the command for {v.name} wrote no {scores_path}")
        result.scores = read_scores(scores_path)
        with open(stamp, "w") as f:
            f.write(mixture_sha + "\n")
        results.append(result)
    return results


def ablation_rows(results: list[RunResult], *, lower_is_better: tuple[str, ...] = ()) -> list[dict]:
    """One row per variant: weights, scores, and each score's change vs the base ("gain": positive = better)."""
    base = next(r for r in results if r.variant.direction == "base")
    metrics = sorted(base.scores)
    rows = []
    for r in results:
        v = r.variant
        row = {"variant": v.name, "component": v.component or "-", "direction": v.direction,
               "weight": v.weights.get(v.component, float("nan")) if v.component else float("nan"),
               "base_weight": base.variant.weights.get(v.component, float("nan")) if v.component else float("nan")}
        for m in metrics:
            score = r.scores.get(m, float("nan"))
            change = score - base.scores[m]
            row[m] = score
            row[f"gain:{m}"] = (-change if m in lower_is_better else change) + 0.0  # + 0.0: no "-0.0000"
        rows.append(row)
    return rows


def write_table(rows: list[dict], out_dir: str) -> tuple[str, str]:
    csv_path, md_path = os.path.join(out_dir, "ablation.csv"), os.path.join(out_dir, "ablation.md")
    keys = list(rows[0])
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)

    def fmt(x):
        return f"{x:.4f}" if isinstance(x, float) and math.isfinite(x) else ("-" if isinstance(x, float) else str(x))

    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(fmt(r[k]) for k in keys) + " |" for r in rows]
    with open(md_path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return csv_path, md_path


def plot(rows: list[dict], out_path: str, *, title: str = "") -> str:
    """Bars of score gain per component, up-weighted vs down-weighted, one panel per metric."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [k[len("gain:"):] for k in rows[0] if k.startswith("gain:")]
    comps = list(dict.fromkeys(r["component"] for r in rows if r["direction"] != "base"))
    ncols = min(3, len(metrics))
    nrows = math.ceil(len(metrics) / ncols)
    panel_w = max(4.0, 1.3 * len(comps) + 2)
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel_w * ncols, 3.6 * nrows), squeeze=False)
    for ax in axes.flat[len(metrics):]:
        ax.set_visible(False)
    width = 0.38
    for ax, m in zip(axes.flat, metrics):
        for offset, direction, color in ((-width / 2, "plus", "tab:green"), (width / 2, "minus", "tab:red")):
            vals = [next((r[f"gain:{m}"] for r in rows if r["component"] == c and r["direction"] == direction), 0.0)
                    for c in comps]
            ax.bar([i + offset for i in range(len(comps))], vals, width, color=color,
                   label=f"weight {'up' if direction == 'plus' else 'down'}")
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(comps)))
        ax.set_xticklabels(comps, rotation=20)
        ax.set_title(m)
        ax.set_ylabel("score change vs base (+ = better)")
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)
    plt.close(fig)
    return out_path
