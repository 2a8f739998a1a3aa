"""`cidermill eval data dedup`: near-duplicate detection on copies planted into real documents.

Corpus: the real C4 documents bundled in data/samples (and the Wikipedia sample in
../shared/data/web_text when present), each kept once, followed by edited copies of a subset at
controlled edit rates (word substitutions, deletions and insertions in equal parts, plus a case
and whitespace change). Every copy's true Jaccard similarity to its original is computed exactly
on the same word 5-gram shingles the stage uses.

The stage runs as in a pipeline: build over Parquet shards (originals first, so they are kept),
then apply. Measured:
- recall at Jaccard >= 0.8: planted copies with true J >= 0.8 that were dropped;
- precision: dropped documents whose true Jaccard with the document kept for their cluster is
  >= 0.5 (anything below is not a near-duplicate by any usual definition);
- detection rate per Jaccard bin (the S-curve).
Targets: recall >= 0.95, precision >= 0.99.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from corpus.dedup.drops import read_drops
from corpus.executors.local import LocalTaskMap
from corpus.registry import stage_class
from evals.shared import shared_root

from ..report import EvalReport

NAME = "dedup"
HELP = "MinHash dedup precision/recall on near-duplicates planted into real documents"
REPO = Path(__file__).resolve().parents[2]
RATES = [0.0, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.2]
BINS = [(0.9, 1.01), (0.8, 0.9), (0.7, 0.8), (0.6, 0.7), (0.5, 0.6), (0.0, 0.5)]


def add_arguments(parser) -> None:
    parser.add_argument("--originals", type=int, default=120, help="documents that get edited copies")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", default="{}", help="JSON options for minhash_dedup_v1")


def real_documents() -> list[str]:
    with gzip.open(REPO / "data" / "samples" / "c4" / "c4_demo.jsonl.gz", "rt", encoding="utf-8") as f:
        docs = [json.loads(line)["text"] for line in f]
    wiki = shared_root() / "web_text" / "llamafactory_demo" / "wiki_demo.txt"
    if wiki.exists():
        docs += [line for line in wiki.read_text(encoding="utf-8").splitlines() if line.strip()]
    seen, out = set(), []
    for d in docs:  # the sample itself may hold exact copies; the eval plants its own
        key = " ".join(re.findall(r"\w+", d.lower()))
        if len(key.split()) >= 50 and key not in seen:
            seen.add(key)
            out.append(d)
    return out


def edit(text: str, rate: float, rng: random.Random) -> str:
    words = text.split()
    out = []
    for w in words:
        r = rng.random()
        if r < rate / 3:
            out.append(f"w{rng.randrange(10**6)}")  # substitute
        elif r < 2 * rate / 3:
            continue  # delete
        elif r < rate:
            out += [w, f"w{rng.randrange(10**6)}"]  # insert after
        else:
            out.append(w)
    out = " ".join(out)
    return out.upper() if rng.random() < 0.3 else out.replace(" ", "  ", 3)


def shingles(text: str, n: int = 5) -> set:
    w = re.findall(r"\w+", text.lower())
    return {tuple(w[i:i + n]) for i in range(max(len(w) - n + 1, 1))}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def run(args) -> EvalReport:
    rng = random.Random(args.seed)
    docs = real_documents()
    originals = rng.sample(range(len(docs)), min(args.originals, len(docs)))
    rows = [{"id": f"o{i}", "text": t} for i, t in enumerate(docs)]
    truth = {}  # copy id -> (original id, rate, true J)
    copies = []
    for o in originals:
        for rate in RATES:
            t = edit(docs[o], rate, rng)
            cid = f"c{o}-{rate}"
            copies.append({"id": cid, "text": t})
            truth[cid] = (f"o{o}", rate, jaccard(shingles(docs[o]), shingles(t)))
    rng.shuffle(copies)
    options = json.loads(args.config)
    stage = stage_class("minhash_dedup_v1")(options)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        all_rows = rows + copies
        for k in range(0, len(all_rows), 400):  # several shards, originals first
            p = Path(tmp) / f"s{k // 400:03d}.parquet"
            pq.write_table(pa.Table.from_pylist(all_rows[k:k + 400]), p)
            paths.append(str(p))
        start = time.perf_counter()
        state = stage.build(paths, workdir=str(Path(tmp) / "work"), tasks=LocalTaskMap(1))
        seconds = time.perf_counter() - start
        pairs = read_drops(state).to_pylist() if state else []  # corpus/dedup/drops.py
    text_of = {r["id"]: r["text"] for r in all_rows}
    dropped = {p["id"]: p["kept_id"] for p in pairs}

    should = [c for c, (_, _, j) in truth.items() if j >= 0.8]
    recall = sum(c in dropped for c in should) / max(len(should), 1)
    correct = [d for d, k in dropped.items() if jaccard(shingles(text_of[d]), shingles(text_of[k])) >= 0.5]
    precision = len(correct) / max(len(dropped), 1)
    false_drops = sorted(set(dropped) - set(correct))

    by_rate = []
    for rate in RATES:
        cs = [c for c, (_, r, _) in truth.items() if r == rate]
        js = [truth[c][2] for c in cs]
        by_rate.append({"edit_rate": rate, "copies": len(cs), "mean_jaccard": sum(js) / len(js),
                        "detected": sum(c in dropped for c in cs) / len(cs)})
    by_bin = []
    for lo, hi in BINS:
        cs = [c for c, (_, _, j) in truth.items() if lo <= j < hi]
        if cs:
            by_bin.append({"jaccard": f"[{lo:.1f}, {min(hi, 1.0):.1f}{']' if hi > 1 else ')'}", "copies": len(cs),
                           "detected": sum(c in dropped for c in cs) / len(cs)})
    originals_dropped = sum(1 for d in dropped if d.startswith("o"))
    report = EvalReport(NAME)
    report.tables["summary"] = [{
        "documents": len(all_rows), "real_originals": len(rows), "planted_copies": len(copies),
        "copies_jaccard_ge_0.8": len(should), "dropped": len(dropped), "recall_j_ge_0.8": recall,
        "precision": precision, "real_docs_dropped": originals_dropped, "build_seconds": seconds,
    }]
    report.tables["detection by edit rate"] = by_rate
    report.tables["detection by true Jaccard (5-gram shingles)"] = by_bin
    report.targets["recall >= 0.95 at Jaccard >= 0.8"] = recall >= 0.95
    report.targets["precision >= 0.99"] = precision >= 0.99
    report.notes.append(f"minhash_dedup_v1 config: {json.dumps(stage.config_dict(), sort_keys=True)}")
    if false_drops:
        report.notes.append(f"dropped with Jaccard < 0.5 to their kept document: {false_drops[:10]}")
    return report
