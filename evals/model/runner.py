"""Run named tasks on one LM and write a versioned result folder.

A result folder holds `manifest.json` (written last, atomically): the model (backend, checkpoint, run,
stage, step, tokens seen, held-out loss), every task's version, prompt, few-shot source and seed, the
limit, the benchmark data folder, the code revision; and `samples/<task>.jsonl` with per-item outputs.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from manifests.errors import ConfigError
from manifests.manifest import code_revision

from .data import benchmarks_dir

RESULT_SCHEMA = 1


def task_registry() -> dict[str, tuple[str, callable]]:
    """name -> (family, run(lm, folder, limit) -> result dict)."""
    from . import generation, longcontext, posttrain
    from .loglik import GAUNTLET_LOGLIK, LOGLIK_TASKS, run_loglik

    reg = {n: ("loglik", (lambda n: lambda lm, f, lim, **_: run_loglik(lm, n, f, lim))(n)) for n in LOGLIK_TASKS}
    for rel in GAUNTLET_LOGLIK:
        n = "gauntlet/" + rel[: -len(".jsonl")]
        reg[n] = ("loglik", (lambda n: lambda lm, f, lim, **_: run_loglik(lm, n, f, lim))(n))
    reg.update(generation.TASKS)
    reg.update(posttrain.TASKS)
    reg.update(longcontext.TASKS)
    return reg


SUITES = {  # per training stage (AFM report: pretraining benchmarks, then post-training ones)
    "pretrain": ["mmlu", "arc_easy", "arc_challenge", "piqa", "boolq", "winogrande", "lambada", "gsm8k", "math"],
    "gauntlet": None,  # filled in expand_tasks: every gauntlet log-likelihood file
    "posttrain": ["ifeval", "bfcl", "humaneval", "mbpp", "summaries"],
    "longcontext": ["niah", "ruler_multikey", "ruler_multivalue", "ruler_vartrack"],
}


def expand_tasks(spec: str) -> list[str]:
    reg = task_registry()
    names: list[str] = []
    for part in [p.strip() for p in spec.split(",") if p.strip()]:
        if part == "gauntlet":
            names += [n for n in reg if n.startswith("gauntlet/")]
        elif part in SUITES:
            names += expand_tasks(",".join(SUITES[part]))
        elif part == "all":
            names += list(reg)
        elif part in reg:
            names.append(part)
        else:
            raise ConfigError(f"unknown task {part!r}; known: {', '.join(sorted(reg))} and suites "
                              f"{', '.join(SUITES)}, all")
    return list(dict.fromkeys(names))


def evaluate(lm, tasks: list[str], *, limit: int | None = None, data_dir: str | None = None,
             options: dict[str, dict] | None = None, log=print) -> dict:
    """`options`: per-task keyword options, e.g. {"humaneval": {"samples": 10}}."""
    reg = task_registry()
    folder = benchmarks_dir(data_dir)
    results = {}
    for name in tasks:
        start = time.perf_counter()
        res = reg[name][1](lm, folder, limit, **(options or {}).get(name, {}))
        res["seconds"] = round(time.perf_counter() - start, 3)
        results[name] = res
        shown = {k: round(v, 4) if isinstance(v, float) else v for k, v in res["metrics"].items()}
        log(f"{name:40s} {shown}  ({res['seconds']:.1f} s)")
    return {"schema_version": RESULT_SCHEMA, "model": lm.describe(), "limit": limit, "data_dir": str(folder),
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "code_revision": code_revision(),
            "tasks": results}


def model_key(model: dict) -> str:
    """Which model a result folder scored: a cidermill checkpoint by its weights id, others by backend and
    path or model name (what `write_results` compares before it replaces a folder)."""
    if model.get("weights_id"):
        return f"weights:{model['weights_id']}"
    return json.dumps([model.get("backend"), model.get("path") or model.get("model"), model.get("url")])


def default_out(model: dict, spec: str) -> Path:
    """data/evals/model/<run>-<step dir>-<weights id>: two checkpoints with the same step name (two runs, or a
    rerun with other weights) never share a folder; a transformers folder or server model by its name."""
    if model.get("weights_id"):
        step = Path(model.get("checkpoint") or spec).name
        return Path("data/evals/model") / f"{model.get('run') or 'run'}-{step}-{model['weights_id'][:12]}"
    return Path("data/evals/model") / Path(spec).resolve().name


def write_results(result: dict, out: str | Path) -> Path:
    """Write the result folder under a temporary name and rename it into place: a folder holding an earlier
    result of the same model is replaced whole (no stale samples left); one holding another model's results
    (or other files) is refused, not mixed."""
    import shutil

    from training.checkpoint import commit_dir

    out = Path(out)
    _check_result_target(out, result["model"])
    partial = out.parent / f".{out.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "samples").mkdir(parents=True)
    manifest = json.loads(json.dumps(result, default=str))
    for name, res in manifest["tasks"].items():
        samples = res.pop("samples", [])
        path = partial / "samples" / (name.replace("/", "__") + ".jsonl")
        path.write_text("".join(json.dumps(s, default=str) + "\n" for s in samples))
        res["samples_file"] = str(path.relative_to(partial))
    tmp = partial / "manifest.json.tmp"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, partial / "manifest.json")
    commit_dir(partial, out)
    return out / "manifest.json"


def _check_result_target(out: Path, model: dict) -> None:
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    try:
        previous = json.loads((out / "manifest.json").read_text())["model"]
    except (OSError, ValueError, KeyError, TypeError):
        raise ConfigError(f"{out} is not empty and holds no model-eval result; give --out a new folder") from None
    if model_key(previous) != model_key(model):
        other = previous.get("checkpoint") or previous.get("path") or previous.get("model")
        raise ConfigError(f"{out} holds the results of another model ({other}); not mixing them: give --out a "
                          "new folder")


def read_results(path: str | Path) -> dict:
    path = Path(path)
    if path.is_dir():
        path = path / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not a model-eval result ({exc})") from None
    if manifest.get("schema_version") != RESULT_SCHEMA:
        raise ConfigError(f"{path}: unknown schema_version {manifest.get('schema_version')!r}")
    return manifest


def headline(res: dict) -> dict[str, float]:
    return {k: v for k, v in res["metrics"].items()
            if isinstance(v, (int, float)) and k not in ("n", "samples_per_problem", "ungraded")}


def compare(a: dict, b: dict) -> list[dict]:
    """Per task and metric: A, B and B - A (tasks in either result). The note says when the two were not
    measured alike: another task version, or another number of items (a score on 10 items minus one on
    100 is not a change of the model)."""
    rows = []
    for task in sorted(set(a["tasks"]) | set(b["tasks"])):
        ma = headline(a["tasks"][task]) if task in a["tasks"] else {}
        mb = headline(b["tasks"][task]) if task in b["tasks"] else {}
        ta, tb = a["tasks"].get(task, {}), b["tasks"].get(task, {})
        notes = []
        if ta and tb and ta.get("version") != tb.get("version"):
            notes.append(f"versions differ: {ta.get('version')} vs {tb.get('version')}")
        na, nb = (ta.get("metrics") or {}).get("n"), (tb.get("metrics") or {}).get("n")
        if ta and tb and na != nb:
            notes.append(f"items differ: {na} vs {nb}")
        for metric in sorted(set(ma) | set(mb)):
            x, y = ma.get(metric), mb.get(metric)
            rows.append({"task": task, "metric": metric, "A": x, "B": y,
                         "delta": (y - x) if x is not None and y is not None else None, "note": "; ".join(notes)})
    return rows
