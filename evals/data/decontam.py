"""`cidermill eval data decontam`: benchmark items planted into real pages, and clean pages.

Host pages: the real C4 documents bundled in data/samples. For a sample of items from every
registered benchmark, one host page each gets the item in one of these forms:
- verbatim: every segment of the item (question, choices, answer...) inserted at a paragraph break;
- partial: a contiguous half of the item's longest segment (items whose longest segment has at
  least 2 x max_n words, so the half can hold a max_n-gram);
- case/whitespace: the verbatim text with random upper/lower/title case per word and its spaces
  turned into newlines, tabs or double spaces;
- punctuation: the verbatim text with punctuation removed or doubled.
The untouched C4 pages (and the Wikipedia sample when present) are the clean set: any drop there
is a false drop. decontaminate_v1 runs as in a pipeline (build over Parquet shards, then apply).
Targets: recall >= 0.99 verbatim, >= 0.9 for the lightly edited forms, false drops <= 0.1%.
"""

from __future__ import annotations

import json
import random
import re
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from corpus.decontam.benchmarks import benchmarks_dir, load_items
from corpus.dedup.drops import read_drops
from corpus.executors.local import LocalTaskMap
from corpus.registry import stage_class

from ..report import EvalReport
from .dedup import real_documents

NAME = "decontam"
HELP = "decontamination recall on benchmark items planted into real pages; false drops on clean pages"
FORMS = ["verbatim", "partial", "case_whitespace", "punctuation"]


def add_arguments(parser) -> None:
    parser.add_argument("--per-benchmark", type=int, default=20, help="items sampled per benchmark and form")
    parser.add_argument("--benchmarks-dir", help="default: $CIDERMILL_BENCHMARKS, else the copies shipped with cidermill")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", default="{}", help="JSON options for decontaminate_v1")


def _words(text: str) -> list[str]:
    return text.split()


def plant(form: str, segments: tuple[str, ...], rng: random.Random, max_n: int) -> str | None:
    text = "\n".join(segments)
    if form == "verbatim":
        return text
    if form == "partial":
        longest = max(segments, key=lambda s: len(_words(s)))
        w = _words(longest)
        if len(w) < 2 * max_n:
            return None
        half = len(w) // 2
        start = rng.randrange(0, len(w) - half + 1)
        return " ".join(w[start:start + half])
    if form == "case_whitespace":
        cases = [str.upper, str.lower, str.title, lambda s: s]
        seps = ["\n", "\t", "  ", " \n "]
        return "".join(rng.choice(cases)(w) + rng.choice(seps) for w in _words(text))
    if form == "punctuation":
        return re.sub(r"[^\w\s]", lambda m: rng.choice(["", m.group(0) * 2, " "]), text)
    raise ValueError(form)


def insert(host: str, snippet: str, rng: random.Random) -> str:
    paras = host.split("\n")
    k = rng.randrange(0, len(paras) + 1)
    return "\n".join(paras[:k] + [snippet] + paras[k:])


def run(args) -> EvalReport:
    rng = random.Random(args.seed)
    options = {"benchmarks_dir": args.benchmarks_dir, **json.loads(args.config)}
    stage = stage_class("decontaminate_v1")({k: v for k, v in options.items() if v is not None})
    cfg = stage.config
    folder = benchmarks_dir(cfg.benchmarks_dir)
    hosts = real_documents()
    clean = [{"id": f"clean{i}", "text": t} for i, t in enumerate(hosts)]
    planted, truth = [], {}
    for name in cfg.benchmarks:
        items = load_items(name, folder)
        for form in FORMS:
            for item in rng.sample(items, min(args.per_benchmark, len(items))):
                snippet = plant(form, item.segments, rng, cfg.max_n)
                if snippet is None:
                    continue
                pid = f"p{len(planted)}"
                planted.append({"id": pid, "text": insert(rng.choice(hosts), snippet, rng)})
                truth[pid] = (name, form, item.item_id)
    rows = clean + planted
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for k in range(0, len(rows), 500):
            p = Path(tmp) / f"s{k // 500:03d}.parquet"
            pq.write_table(pa.Table.from_pylist(rows[k:k + 500]), p)
            paths.append(str(p))
        start = time.perf_counter()
        state = stage.build(paths, workdir=str(Path(tmp) / "work"), tasks=LocalTaskMap(1))
        seconds = time.perf_counter() - start
        found = {r["id"]: r for r in read_drops(state).to_pylist()}  # corpus/dedup/drops.py

    per_form = []
    for form in FORMS:
        ids = [i for i, t in truth.items() if t[1] == form]
        hit = [i for i in ids if i in found]
        right_item = [i for i in hit if found[i]["benchmark"] == truth[i][0]]
        per_form.append({"form": form, "planted": len(ids), "recall": len(hit) / max(len(ids), 1),
                         "right_benchmark": len(right_item) / max(len(hit), 1)})
    per_bench = []
    for name in cfg.benchmarks:
        ids = [i for i, t in truth.items() if t[0] == name]
        per_bench.append({"benchmark": name, "planted": len(ids),
                          "recall": sum(i in found for i in ids) / max(len(ids), 1)})
    false = [i for i in found if i.startswith("clean")]
    false_rate = len(false) / len(clean)
    recall = {r["form"]: r["recall"] for r in per_form}
    report = EvalReport(NAME)
    report.tables["summary"] = [{"clean_docs": len(clean), "planted_docs": len(planted),
                                 "false_drops": len(false), "false_drop_rate": false_rate,
                                 "build_seconds": seconds, "docs_per_s": len(rows) / seconds}]
    report.tables["recall by form"] = per_form
    report.tables["recall by benchmark"] = per_bench
    report.targets["recall >= 0.99 verbatim"] = recall["verbatim"] >= 0.99
    for form in ("partial", "case_whitespace", "punctuation"):
        report.targets[f"recall >= 0.9 {form}"] = recall[form] >= 0.9
    report.targets["false drops <= 0.1% on clean C4"] = false_rate <= 0.001
    report.notes.append(f"decontaminate_v1: min_n={cfg.min_n} max_n={cfg.max_n} common_threshold="
                        f"{cfg.common_threshold}, {len(cfg.benchmarks)} benchmarks: {', '.join(cfg.benchmarks)}")
    report.notes.append(f"{len(clean)} clean documents: one false drop = {100 / len(clean):.2f}%, so the 0.1% "
                        "target means none here")
    for i in false[:5]:
        report.notes.append(f"false drop {i}: {found[i]['benchmark']} {found[i]['item']} '{found[i]['ngram']}'")
    misses = [i for i, t in truth.items() if i not in found and t[1] == "verbatim"]
    for i in misses[:5]:
        report.notes.append(f"missed verbatim: {truth[i]}")
    return report
