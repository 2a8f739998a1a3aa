"""Mixture-ratio ablations (AFM report 4.2, "tuning the mixture ratio"): nudge one weight at a time,
train a short proxy model on each variant, and see which nudges help.

Variants of a base mixture: for each component i, w_i * (1 + delta) and w_i * (1 - delta) (or
w_i +/- delta with `absolute=True`), floored at 0 and renormalised. Each variant is published as a
mixture version `<base>.abl-<component>-<plus|minus>`, so a trainer reads it like any mixture.

The runner fills a command template per run (the base included, once per seed) and runs it; the command
writes a JSON of scores (`{"metric": number, ...}`, or `{"scores": {...}}`) to `{out}/scores.json`. The
default command (`corpus/mix/cli.py`) trains a real tiny megatron proxy (`training/mix_proxy.py`); the
unigram proxy (`corpus/mix/unigram_proxy.py`) stays as the seconds-cheap option. Runs go to a pool of
processes, or to Ray. Gains are paired by seed (variant minus base, same seed) and reported as the mean and
the standard deviation over seeds.
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
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

from manifests import Catalog
from manifests.errors import ConfigError, FatalError
from manifests.mixture import MixtureManifest

log = logging.getLogger("cidermill.ablate")
SCORES_FILE = "scores.json"


# -- the proxy command's side of the contract (corpus/mix/unigram_proxy.py, training/mix_proxy.py) ---------

def open_mixture(mixture: str, root: str | None) -> MixtureManifest:
    """A proxy's `--mixture`: a mixture.json path (in its catalog, or anywhere with `root`) or a catalog ref."""
    if mixture.endswith(".json") or os.path.isfile(mixture):
        return MixtureManifest.read(mixture, root=root)
    return MixtureManifest.open(root or "data/root", mixture)


def write_scores(out_dir: str, scores: dict[str, float]) -> None:
    """`{out_dir}/scores.json`, written last and atomically: its presence means the run finished."""
    os.makedirs(out_dir, exist_ok=True)
    tmp = os.path.join(out_dir, SCORES_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(scores, f, indent=1, sort_keys=True)
    os.replace(tmp, os.path.join(out_dir, SCORES_FILE))


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
    seed: int | None = None


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
                 *, timeout_s: float | None = None, seeds: tuple[int, ...] | None = None, workers: int = 1,
                 executor: str = "local") -> list[RunResult]:
    """Publish each variant, run `command` once per (variant, seed) (skipping runs already scored for the
    same mixture), collect scores. Runs go to `workers` processes at a time ("local": a pool of
    subprocesses) or to a Ray cluster ("ray": one task per run; the data root must be shared)."""
    os.makedirs(out_dir, exist_ok=True)
    seeds = tuple(seeds) if seeds else (base.seed,)
    jobs = []
    for v in variants:
        mixture = base if v.direction == "base" else base.with_weights(v.weights, name=v.name, stage="ablation")
        path = mixture.publish(catalog)
        mixture_sha = path.path.rsplit("/", 2)[-2]  # <root>/<name>/<version id>/mixture.json
        for seed in seeds:
            run_dir = os.path.join(out_dir, v.name) if len(seeds) == 1 and seeds[0] == base.seed \
                else os.path.join(out_dir, v.name, f"seed-{seed}")
            os.makedirs(run_dir, exist_ok=True)
            result = RunResult(variant=v, mixture_path=path.uri, out_dir=run_dir, seed=seed)
            scores_path = os.path.join(run_dir, SCORES_FILE)
            stamp = os.path.join(run_dir, "mixture.sha256")
            if os.path.exists(scores_path) and os.path.exists(stamp) and open(stamp).read().strip() == mixture_sha:
                result.scores, result.resumed = read_scores(scores_path), True
                jobs.append((result, None, None))
                continue
            argv = _fill(command, {"mixture": path.uri, "mixture_ref": f"{v.name}@{mixture_sha[:12]}",
                                   "name": v.name, "out": run_dir, "root": catalog.root.uri, "seed": str(seed),
                                   "python": sys.executable})
            jobs.append((result, argv, mixture_sha))
    todo = [(r, argv) for r, argv, _ in jobs if argv is not None]
    outcomes = _run_all(todo, workers=workers, executor=executor, timeout_s=timeout_s)
    for (result, argv, mixture_sha) in jobs:
        if argv is None:
            continue
        code, seconds = outcomes[result.out_dir]
        result.seconds = seconds
        log_path = os.path.join(result.out_dir, "run.log")
        if code == "timeout":
            raise FatalError(f"ablate: {result.variant.name} seed {result.seed} ran past {timeout_s} s; "
                             f"see {log_path}")
        if code != 0:
            raise FatalError(f"ablate: the command failed for {result.variant.name} seed {result.seed} "
                             f"(exit {code}); see {log_path}")
        scores_path = os.path.join(result.out_dir, SCORES_FILE)
        if not os.path.exists(scores_path):
            raise FatalError(f"ablate: the command for {result.variant.name} wrote no {scores_path}")
        result.scores = read_scores(scores_path)
        with open(os.path.join(result.out_dir, "mixture.sha256"), "w") as f:
            f.write(mixture_sha + "\n")
    return [r for r, _, _ in jobs]


def _run_one(argv: list[str], run_dir: str, timeout_s: float | None) -> tuple[int | str, float]:
    """Run one proxy command, output to run_dir/run.log; (exit code or "timeout", seconds)."""
    start = time.perf_counter()
    with open(os.path.join(run_dir, "run.log"), "wb") as logf:
        try:
            proc = subprocess.run(argv, stdout=logf, stderr=subprocess.STDOUT, timeout=timeout_s)
        except FileNotFoundError as exc:
            raise ConfigError(f"ablate: cannot run {argv[0]!r} ({exc.strerror})") from exc
        except subprocess.TimeoutExpired:
            return "timeout", time.perf_counter() - start
    return proc.returncode, time.perf_counter() - start


def _run_all(todo: list[tuple[RunResult, list[str]]], *, workers: int, executor: str,
             timeout_s: float | None) -> dict[str, tuple[int | str, float]]:
    for r, argv in todo:
        log.info("ablate: running %s", " ".join(shlex.quote(a) for a in argv))
    if executor == "ray":
        import ray

        if not ray.is_initialized():
            ray.init(ignore_reinit_error=True, log_to_driver=False)
        remote = ray.remote(num_cpus=1)(_run_one)
        refs = [remote.remote(argv, r.out_dir, timeout_s) for r, argv in todo]
        return {r.out_dir: out for (r, _), out in zip(todo, ray.get(refs))}
    if executor != "local":
        raise ConfigError(f"ablate: executor must be 'local' or 'ray'; got {executor!r}")
    # each run is its own process (a fresh interpreter); the threads only wait on them
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, workers)) as pool:
        futures = {r.out_dir: pool.submit(_run_one, argv, r.out_dir, timeout_s) for r, argv in todo}
        return {k: f.result() for k, f in futures.items()}


def ablation_rows(results: list[RunResult], *, lower_is_better: tuple[str, ...] = ()) -> list[dict]:
    """One row per variant: weights, each score's mean over seeds, and its change vs the base run of the
    same seed ("gain": positive = better), mean and sample standard deviation over seeds."""
    base_runs = {r.seed: r for r in results if r.variant.direction == "base"}
    if not base_runs:
        raise FatalError("ablate: no base run among the results")
    base = next(iter(base_runs.values()))
    metrics = sorted(base.scores)
    by_variant: dict[str, list[RunResult]] = {}
    for r in results:
        by_variant.setdefault(r.variant.name, []).append(r)
    rows = []
    for runs in by_variant.values():
        v = runs[0].variant
        row = {"variant": v.name, "component": v.component or "-", "direction": v.direction,
               "weight": v.weights.get(v.component, float("nan")) if v.component else float("nan"),
               "base_weight": base.variant.weights.get(v.component, float("nan")) if v.component else float("nan"),
               "seeds": len(runs)}
        for m in metrics:
            scores = [r.scores.get(m, float("nan")) for r in runs]
            gains = [(-1 if m in lower_is_better else 1) * (r.scores.get(m, float("nan")) - base_runs[r.seed].scores[m])
                     for r in runs]
            row[m] = sum(scores) / len(scores)
            row[f"gain:{m}"] = sum(gains) / len(gains) + 0.0  # + 0.0: no "-0.0000"
            row[f"gain_sd:{m}"] = statistics.stdev(gains) if len(gains) > 1 else 0.0
        rows.append(row)
    return rows


def write_manifest(out_dir: str, *, base: MixtureManifest, settings: dict, results: list[RunResult],
                   rows: list[dict], files: list[str]) -> str:
    """ablation.json, written last (its presence means the ablation finished): what was varied, how each
    run was made, every run's scores per seed, the table rows, and the files beside it."""
    body = {
        "schema_version": 1, "kind": "mixture-ablation", "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "base": {"name": base.name, "seed": base.seed, "weights": {c.name: c.weight for c in base.components}},
        "settings": settings,
        "runs": [{"variant": r.variant.name, "seed": r.seed, "mixture": r.mixture_path, "scores": r.scores,
                  "seconds": round(r.seconds, 3), "resumed": r.resumed} for r in results],
        "rows": rows, "files": files,
    }
    path = os.path.join(out_dir, "ablation.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(body, f, indent=1, allow_nan=True)
    os.replace(tmp, path)
    return path


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
            errs = [next((r.get(f"gain_sd:{m}", 0.0) for r in rows if r["component"] == c and
                          r["direction"] == direction), 0.0) for c in comps]
            ax.bar([i + offset for i in range(len(comps))], vals, width, color=color, yerr=errs, capsize=3,
                   label=f"weight {'up' if direction == 'plus' else 'down'}")
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(comps)))
        ax.set_xticklabels(comps, rotation=20)
        ax.set_title(m)
        ax.set_ylabel("vs base (+ better; bars: sd)")
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)
    plt.close(fig)
    return out_path
