"""HumanEval and MBPP as sandbox programs: the check that the sandbox and the harness run real
tests faithfully (every canonical solution passes, every mutated one fails).

The mutation wraps the entry point so each return value is perturbed (a bool flipped, a number
moved by one, a sequence extended, ...): a solution that still passes after that has tests that
do not look at its output, which HumanEval's never do.
"""

from __future__ import annotations

import ast
import gzip
import json
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def benchmarks_dir() -> Path:
    """Where tests look for the benchmarks ($CIDERMILL_BENCHMARKS, else ../shared/data/benchmarks);
    product code takes a path instead (`load_humaneval(path)`, `synth sandbox-check --data`)."""
    return Path(os.environ.get("CIDERMILL_BENCHMARKS", REPO / ".." / "shared" / "data" / "benchmarks")).resolve()


def humaneval_path(data: str | Path) -> Path:
    """`data` is HumanEval.jsonl.gz itself, or a folder holding it (directly or in humaneval/)."""
    data = Path(data)
    for path in (data, data / "HumanEval.jsonl.gz", data / "humaneval" / "HumanEval.jsonl.gz"):
        if path.is_file():
            return path
    raise FileNotFoundError(f"HumanEval not found at {data} (want HumanEval.jsonl.gz or a folder holding it)")


def load_humaneval(data: str | Path) -> list[dict]:
    path = humaneval_path(data)
    opener = gzip.open if path.suffix == ".gz" else open
    items = []
    with opener(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: line {n}: not JSON ({exc.msg})") from None
            missing = {"task_id", "prompt", "canonical_solution", "test", "entry_point"} - set(item)
            if missing:
                raise ValueError(f"{path}: line {n}: missing {sorted(missing)}")
            items.append(item)
    return items


def load_mbpp(folder: str | Path) -> list[dict]:
    path = Path(folder) / "mbpp" / "mbpp.jsonl"
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def humaneval_program(item: dict, solution: str | None = None) -> str:
    """prompt + solution body + the item's `check` + the call, as HumanEval's harness runs it."""
    body = item["canonical_solution"] if solution is None else solution
    return f"{item['prompt']}{body}\n\n{item['test']}\n\ncheck({item['entry_point']})\n"


_PERTURB = '''
def _cidermill_perturb(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "~"
    if isinstance(value, list):
        return value + [None]
    if isinstance(value, tuple):
        return value + (None,)
    if isinstance(value, (set, dict)):
        return None
    return 0 if value is None else None

_cidermill_original = {name}
def {name}(*args, **kwargs):
    return _cidermill_perturb(_cidermill_original(*args, **kwargs))
'''


def humaneval_judge_job(item: dict, *, completion: str | None = None, mutated: bool = False) -> dict:
    """Keyword arguments for `Sandbox.judge`: the prompt is the trusted prelude (the tests use its
    helpers, e.g. `poly`), prompt + completion is the solution, `check(entry_point)` is the test."""
    name = item["entry_point"]
    body = item["canonical_solution"] if completion is None else completion
    solution = f"{item['prompt']}{body}\n"
    if mutated:
        solution += _PERTURB.format(name=name)
    return {"solution": solution, "tests": f"{item['test']}\n\ncheck({name})\n", "prelude": _prelude(item["prompt"]),
            "entry_points": [name]}


def _prelude(prompt: str) -> str:
    """The prompt as code of its own: it ends in the entry point's header, whose docstring is its
    body; without a docstring the header gets `pass` (the stub replaces it anyway)."""
    for text in (prompt, prompt.rstrip() + "\n    pass\n"):
        try:
            ast.parse(text)
            return text
        except SyntaxError:
            continue
    return ""


def mutated_humaneval_program(item: dict) -> str:
    """The canonical solution with every return value perturbed."""
    name = item["entry_point"]
    return (f"{item['prompt']}{item['canonical_solution']}\n{_PERTURB.format(name=name)}\n\n{item['test']}\n\n"
            f"check({name})\n")
