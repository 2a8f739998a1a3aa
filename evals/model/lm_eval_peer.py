"""Run lm-evaluation-harness (the reference harness) offline on our task items, for the cross-check test and
benchmarks/eval_loglik.py.

Our items are written as a local jsonl ({context, choices, gold}) with a task YAML that reads it through
`datasets`' json builder (no hub): lm-eval then builds its own requests from the same prompt strings and
scores them with its own tokenization, batching and metrics (HFLM over the `train export-hf` folder).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .loglik import Choice


def write_task(items: list[Choice], folder: Path, name: str) -> str:
    """Write `<name>.jsonl` + `<name>.yaml` under `folder`; returns the lm-eval task name."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / f"{name}.jsonl"
    with open(data, "w") as f:
        for it in items:
            contexts = {c for c, _ in it.requests}
            if len(contexts) != 1 or not all(cont.startswith(" ") for _, cont in it.requests):
                raise ValueError(f"{it.id}: only shared-context multiple choice maps onto an lm-eval YAML task")
            f.write(json.dumps({"context": it.requests[0][0], "choices": [c[1:] for _, c in it.requests],
                                "gold": it.gold}) + "\n")
    task = f"cidermill_{name}"
    (folder / f"{name}.yaml").write_text("\n".join([
        f"task: {task}",
        "dataset_path: json",
        "dataset_kwargs:",
        "  data_files:",
        f"    test: {json.dumps(str(data))}",
        "test_split: test",
        "output_type: multiple_choice",
        'doc_to_text: "{{context}}"',
        'doc_to_choice: "{{choices}}"',
        "doc_to_target: gold",
        'target_delimiter: " "',
        "metric_list:",
        "  - metric: acc",
        "  - metric: acc_norm",
        "", ]))
    return task


def run_lm_eval(hf_path: str | Path, task_dir: Path, tasks: list[str], *, batch_size: int = 16,
                max_length: int = 4096) -> dict[str, dict[str, float]]:
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    lm = HFLM(pretrained=str(hf_path), batch_size=batch_size, device="cpu", dtype="float32", max_length=max_length)
    out = simple_evaluate(model=lm, tasks=tasks, task_manager=TaskManager(include_path=str(task_dir)),
                          num_fewshot=0, log_samples=False, bootstrap_iters=0)
    return {t: {k.split(",")[0]: v for k, v in r.items() if k.split(",")[0] in ("acc", "acc_norm")}
            for t, r in out["results"].items()}
