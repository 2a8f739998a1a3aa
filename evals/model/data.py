"""Where benchmark data comes from, and readers that turn each file format into plain dicts.

`benchmarks_dir()` is the one place that decides the folder (so it can be rewired when bundled copies ship):
    1. the `--data-dir` given on the command line;
    2. the environment variable CIDERMILL_BENCHMARKS;
    3. bundled copies inside the decontamination package (`corpus/decontam/data/benchmarks`), once they ship;
    4. `../shared/data/benchmarks` beside the repository: a development and CI convenience (evals may read it).
A task whose files are missing raises `DataMissing`, naming the file and what to set.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
from pathlib import Path

from manifests.errors import ConfigError, RecordError

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "corpus" / "decontam" / "data" / "benchmarks"
SHARED = REPO.parent / "shared" / "data" / "benchmarks"


class DataMissing(ConfigError):
    pass


def benchmarks_dir(data_dir: str | Path | None = None) -> Path:
    for candidate in (data_dir, os.environ.get("CIDERMILL_BENCHMARKS"), BUNDLED, SHARED):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    raise DataMissing(f"no benchmark data folder: pass --data-dir or set CIDERMILL_BENCHMARKS to a folder laid out "
                      f"like ../shared/data/benchmarks (gsm8k/, mmlu/, llm_foundry_gauntlet/, ...); "
                      f"given {data_dir!r}")


def data_file(folder: Path, rel: str) -> Path:
    path = folder / rel
    if not path.exists():
        raise DataMissing(f"benchmark file {path} is missing: pass --data-dir or set CIDERMILL_BENCHMARKS to a "
                          f"folder that has {rel}")
    return path


def read_jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    rows = []
    with opener(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise RecordError(str(path), f"line {n}", f"not JSON ({exc.msg})") from None
            if not isinstance(rows[-1], dict):
                raise RecordError(str(path), f"line {n}", f"a JSON {type(rows[-1]).__name__}, not an object")
    return rows


def read_mmlu(folder: Path, split: str) -> dict[str, list[dict]]:
    """{subject: [{question, choices, answer (0-3)}]} from the mirror's CSVs (header question,choice0..3,answer)."""
    base = data_file(folder, f"mmlu/{split}")
    out: dict[str, list[dict]] = {}
    for path in sorted(base.glob(f"*_{split}.csv")):
        subject = path.name[: -len(f"_{split}.csv")]
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        if rows and rows[0][:1] == ["question"]:
            rows = rows[1:]
        items = []
        for n, row in enumerate(rows, 1):
            if len(row) != 6:
                raise RecordError(str(path), f"row {n}", f"{len(row)} fields, expected 6")
            answer = row[5].strip()
            if answer and answer in "ABCD":
                idx = "ABCD".index(answer)
            elif answer in ("0", "1", "2", "3"):
                idx = int(answer)
            else:
                raise RecordError(str(path), f"row {n}", f"answer {answer!r} is not one of A-D or 0-3")
            items.append({"question": row[0], "choices": row[1:5], "answer": idx})
        out[subject] = items
    if not out:
        raise DataMissing(f"{base}: no *_{split}.csv files")
    return out


def require_fields(path: Path, rows: list[dict], fields: tuple[str, ...]) -> list[dict]:
    for n, row in enumerate(rows, 1):
        missing = [f for f in fields if f not in row]
        if missing:
            raise RecordError(str(path), f"record {n}", f"lacks {missing}")
    return rows
