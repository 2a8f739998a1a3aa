"""Math seed problems: GSM8K train (and any MATH-format train file a user has), never a test set.

The shared data has GSM8K train but no MATH train split (only MATH test, which is a decontamination
target here), so MATH-format seeds come from a path the user gives (`problem`, `solution` with a
\\boxed{} answer), e.g. the official MATH train set.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa

from manifests.errors import RecordError

from synth.math.answers import gsm8k_final, last_boxed

SEED_SCHEMA = pa.schema([("id", pa.string()), ("source", pa.string()), ("question", pa.string()),
                         ("answer", pa.string()), ("solution", pa.string())])


def _id(source: str, text: str) -> str:
    return hashlib.sha256(f"{source}\x00{text}".encode()).hexdigest()[:16]


def _record(path: Path, n: int, line: str, keys: tuple[str, ...]) -> dict:
    """Line `n` of a seed file as a JSON object with string `keys`, or a RecordError naming file, line, reason."""
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as exc:
        raise RecordError(str(path), f"line {n}", f"not JSON ({exc.msg})") from None
    if not isinstance(rec, dict) or not all(isinstance(rec.get(k), str) for k in keys):
        raise RecordError(str(path), f"line {n}", f"needs string fields {', '.join(keys)}")
    return rec


def load_gsm8k(path: str | Path, *, limit: int | None = None, shortest: bool = False) -> pa.Table:
    """GSM8K jsonl (`question`, `answer` ending in `#### N`). `shortest` picks the shortest problems
    first (small demos with a weak model)."""
    path = Path(path)
    if "test" in path.name:
        raise ValueError(f"{path}: refusing a test split as math seeds (test sets are decontamination targets)")
    rows = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            rec = _record(path, n, line, ("question", "answer"))
            final = gsm8k_final(rec.get("answer", ""))
            if not final:
                raise RecordError(str(path), f"line {n}", "GSM8K answer has no '#### N' final line")
            rows.append({"id": _id(f"gsm8k/{path.name}:{n}", rec["question"]), "source": f"gsm8k/{path.name}:{n}",
                         "question": rec["question"].strip(), "answer": final, "solution": rec["answer"]})
    if shortest:
        rows.sort(key=lambda r: len(r["question"]) + len(r["solution"]))
    return pa.Table.from_pylist(rows[:limit] if limit else rows, schema=SEED_SCHEMA)


def load_math_format(path: str | Path, *, limit: int | None = None) -> pa.Table:
    """MATH-format jsonl (`problem`, `solution` with \\boxed{}); rows without a boxed answer are errors."""
    path = Path(path)
    if "test" in path.name:
        raise ValueError(f"{path}: refusing a test split as math seeds")
    rows = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            rec = _record(path, n, line, ("problem", "solution"))
            final = last_boxed(rec.get("solution", ""))
            if final is None:
                raise RecordError(str(path), f"line {n}", "solution has no \\boxed{} final answer")
            rows.append({"id": _id(f"math/{path.name}:{n}", rec["problem"]), "source": f"math/{path.name}:{n}",
                         "question": rec["problem"].strip(), "answer": final, "solution": rec["solution"]})
    return pa.Table.from_pylist(rows[:limit] if limit else rows, schema=SEED_SCHEMA)
