"""Benchmark readers: one small function per benchmark, registered by name.

A reader gets the benchmarks folder and yields `Item(item_id, segments)`: the texts of one
evaluation item that must not appear in training data (question, passage, choices, reference
answer/solution). Segments are indexed separately, so n-grams never span two fields. Prompt labels
("Question:", "Answer:") are stripped: they are scaffolding of the eval harness, not the item.

The folder is `CIDERMILL_BENCHMARKS` if set, else `../shared/data/benchmarks` beside the repository
(see /work/shared/data/benchmarks/*/SOURCE.txt for provenance).

Adding a benchmark = one function decorated with `@benchmark("name")`.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from manifests.errors import ConfigError, RecordError

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DIR = REPO / ".." / "shared" / "data" / "benchmarks"
_LABEL = re.compile(r"^\s*(?:question|answer|passage|context|choices|q|a)\s*:\s*", re.I | re.M)


@dataclass(frozen=True)
class Item:
    item_id: str
    segments: tuple[str, ...]


Reader = Callable[[Path], Iterator[Item]]
READERS: dict[str, Reader] = {}


def benchmark(name: str) -> Callable[[Reader], Reader]:
    def wrap(fn: Reader) -> Reader:
        if name in READERS:
            raise TypeError(f"benchmark {name!r} is registered twice")
        READERS[name] = fn
        return fn
    return wrap


def benchmarks_dir(configured: str | None = None) -> Path:
    if configured:
        return Path(configured).expanduser()
    return Path(os.environ.get("CIDERMILL_BENCHMARKS", DEFAULT_DIR)).resolve()


def load_items(name: str, folder: Path) -> list[Item]:
    if name not in READERS:
        import difflib

        close = difflib.get_close_matches(name, list(READERS), n=1)
        fix = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(sorted(READERS))}"
        raise ConfigError(f"unknown benchmark {name!r}; {fix}")
    try:
        items = (Item(i.item_id, tuple(c for c in (_clean(s) for s in i.segments if s) if c.strip()))
                 for i in READERS[name](folder))
        return [i for i in items if i.segments]  # an item with no text cannot leak
    except FileNotFoundError as exc:
        raise ConfigError(f"benchmark {name!r}: {exc.filename} not found; set benchmarks_dir or "
                          f"CIDERMILL_BENCHMARKS to the benchmarks folder (now {folder})") from None


def _clean(text: str) -> str:
    return _LABEL.sub(" ", str(text))


def _jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield line_no, json.loads(line)
            except json.JSONDecodeError as exc:
                raise RecordError(str(path), f"line {line_no}", f"invalid JSON ({exc.msg})") from None


def _fields(path: Path, *fields: str, id_field: str | None = None, lists: Iterable[str] = ()) -> Iterator[Item]:
    """Items of a JSON Lines file: each named field a segment; list fields joined into one segment."""
    lists = set(lists)
    for line_no, rec in _jsonl(path):
        segs = []
        for f in fields:
            v = rec.get(f)
            if v is None:
                continue
            segs.append(" ".join(map(str, v)) if f in lists and isinstance(v, list) else str(v))
        yield Item(str(rec[id_field]) if id_field else f"{path.stem}:{line_no}", tuple(segs))


GAUNTLET = "llm_foundry_gauntlet"


@benchmark("gsm8k")
def gsm8k(root: Path) -> Iterator[Item]:
    yield from _fields(root / "gsm8k" / "test.jsonl", "question", "answer")


@benchmark("humaneval")
def humaneval(root: Path) -> Iterator[Item]:
    yield from _fields(root / "humaneval" / "HumanEval.jsonl.gz", "prompt", "canonical_solution", id_field="task_id")


@benchmark("mbpp")
def mbpp(root: Path) -> Iterator[Item]:
    yield from _fields(root / "mbpp" / "mbpp.jsonl", "text", "code", id_field="task_id")


@benchmark("mmlu")
def mmlu(root: Path) -> Iterator[Item]:
    for path in sorted((root / "mmlu" / "test").glob("*.csv")):
        with open(path, newline="", encoding="utf-8") as f:
            for row_no, row in enumerate(csv.DictReader(f), 2):
                choices = " ".join(row.get(f"choice{k}", "") or "" for k in range(4))
                yield Item(f"{path.stem}:{row_no}", (row["question"], choices))


@benchmark("math")
def math(root: Path) -> Iterator[Item]:
    yield from _fields(root / "math_eval_harness" / "math" / "test.jsonl", "problem", "solution")


@benchmark("arc")
def arc(root: Path) -> Iterator[Item]:
    for split in ("arc_challenge", "arc_easy"):
        yield from _fields(root / GAUNTLET / "world_knowledge" / f"{split}.jsonl", "query", "choices",
                           lists=["choices"])


@benchmark("triviaqa")
def triviaqa(root: Path) -> Iterator[Item]:
    yield from _fields(root / GAUNTLET / "world_knowledge" / "triviaqa_sm_sub.jsonl", "context")


@benchmark("ifeval")
def ifeval(root: Path) -> Iterator[Item]:
    yield from _fields(root / "ifeval" / "input_data.jsonl", "prompt", id_field="key")


@benchmark("mtbench")
def mtbench(root: Path) -> Iterator[Item]:
    for _, rec in _jsonl(root / "mtbench" / "question.jsonl"):
        yield Item(str(rec["question_id"]), tuple(rec["turns"]))


@benchmark("piqa")
def piqa(root: Path) -> Iterator[Item]:
    yield from _fields(root / GAUNTLET / "commonsense_reasoning" / "piqa.jsonl", "query", "choices", lists=["choices"])


@benchmark("boolq")
def boolq(root: Path) -> Iterator[Item]:
    yield from _fields(root / GAUNTLET / "reading_comprehension" / "boolq.jsonl", "query")


@benchmark("winogrande")
def winogrande(root: Path) -> Iterator[Item]:
    for line_no, rec in _jsonl(root / GAUNTLET / "language_understanding" / "winogrande.jsonl"):
        yield Item(f"winogrande:{line_no}", (rec["context_options"][0] + " " + rec["continuation"],))


@benchmark("lambada")
def lambada(root: Path) -> Iterator[Item]:
    for line_no, rec in _jsonl(root / GAUNTLET / "language_understanding" / "lambada_openai.jsonl"):
        yield Item(f"lambada:{line_no}", (rec["context"] + " " + rec["continuation"],))


@benchmark("agieval")
def agieval(root: Path) -> Iterator[Item]:
    for name in ("agi_eval_lsat_lr", "agi_eval_lsat_rc", "agi_eval_sat_en"):
        yield from _fields(root / GAUNTLET / "reading_comprehension" / f"{name}.jsonl", "query", "choices",
                           lists=["choices"])
    for name in ("agi_eval_lsat_ar", "agi_eval_sat_math"):
        yield from _fields(root / GAUNTLET / "symbolic_problem_solving" / f"{name}.jsonl", "query", "choices",
                           lists=["choices"])


@benchmark("openbookqa")
def openbookqa(root: Path) -> Iterator[Item]:
    yield from _fields(root / GAUNTLET / "commonsense_reasoning" / "openbook_qa.jsonl", "query", "choices",
                       lists=["choices"])


@benchmark("aime24")
def aime24(root: Path) -> Iterator[Item]:
    yield from _fields(root / "math_eval_harness" / "aime24" / "test.jsonl", "problem", "solution")
