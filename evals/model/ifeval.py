"""The IFEval task: its prompts from the benchmarks folder, greedy responses, scored by the checks in
synth/checkers/ifeval.py (which the instruction reward uses too)."""

from __future__ import annotations

from pathlib import Path

from synth.checkers.ifeval import score

from .data import data_file, read_jsonl


def load_prompts(folder: Path) -> list[dict]:
    return read_jsonl(data_file(folder, "ifeval/input_data.jsonl"))


def run_ifeval(lm, folder: Path, limit: int | None, *, max_new_tokens: int = 256) -> dict:
    prompts = load_prompts(folder)
    prompts = prompts[:limit] if limit else prompts
    outs = lm.generate([p["prompt"] for p in prompts], max_new_tokens=max_new_tokens)
    metrics, rows = score(prompts, outs)
    for row, out in zip(rows, outs):
        row["response"] = out
    return {"task": "ifeval", "family": "posttrain", "version": "v1", "metrics": metrics, "samples": rows,
            "prompt": "the IFEval prompt as the user message, greedy"}
