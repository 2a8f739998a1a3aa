"""`cidermill eval data math_filter`: precision/recall of the math filters on a labelled page set.

The set (corpus/math/labelled.py says exactly how it is built): 262 math pages (MATH problems
rendered as Q&A / MathJax / KaTeX / bare pages, GSM8K word problems, 2 real Readability math
pages) and 281 non-math pages (C4 documents, 128 real Readability pages, 53 real WARC pages).
Methods: the tag filter on the HTML, the symbol filter on the page text (formulas kept as
LaTeX), both as `any`, the math classifier on the page text, and tags/symbols AND classifier.
"""

from __future__ import annotations

import time
from collections import defaultdict

import pyarrow as pa

from corpus.math.html_math import page_text
from evals.data.math_labelled import labelled_set
from corpus.registry import stage_class

from ..report import EvalReport

NAME = "math_filter"
HELP = "math tag/symbol filters and math classifier: precision/recall on a labelled page set"


def add_arguments(parser) -> None:
    parser.add_argument("--threshold", type=float, default=0.5, help="classifier threshold")
    parser.add_argument("--real", action="store_true",
                        help="real pages only (Readability, trafilatura's benchmark pages, WARCs; no rendered "
                             "benchmark text): evals/data/math_labelled.py real_rows()")


def full_config_keeps(rows: list[dict]) -> list[bool]:
    """configs/math.yaml's keep decision up to dedup: visible-math signals -> tag-or-symbol filter -> Q&A /
    forum / page text -> classifier -> domains boost (0.2 on reviewed math domains, else 0.5) -> >= 200 chars."""
    table = pa.table({"html": [r["html"] for r in rows], "url": [r.get("url") or None for r in rows],
                      "i": list(range(len(rows)))})
    for name, options in (("math_signals_v1", {"field": "html"}),
                          ("math_filter_v1", {"require": "any", "min_tags": 1, "min_symbols": 3, "min_density": 0.5}),
                          ("math_qa_extract_v1", {"field": "html", "fallback": "page_text", "require_answer": True,
                                                  "max_answers": 3}),
                          ("math_classifier_v1", {"field": "text"}),
                          ("math_domains_v1", {"field": "url", "mode": "boost", "min_score": 0.5,
                                               "allowed_min_score": 0.2}),
                          ("text_length_v1", {"min_chars": 200})):
        table = stage_class(name)(options)(table).table
    kept = set(table.column("i").to_pylist())
    return [i in kept for i in range(len(rows))]


def _prf(pred: list[bool], gold: list[int]) -> dict:
    tp = sum(p and g for p, g in zip(pred, gold))
    fp = sum(p and not g for p, g in zip(pred, gold))
    fn = sum((not p) and g for p, g in zip(pred, gold))
    prec = tp / (tp + fp) if tp + fp else 0.0
    rec = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return {"precision": prec, "recall": rec, "f1": f1, "tp": tp, "fp": fp, "fn": fn}


def _keeps(stage_name: str, options: dict, table: pa.Table) -> list[bool]:
    stage = stage_class(stage_name)(options)
    reasons = stage.reasons(table) if hasattr(stage, "reasons") else None
    return [r is None for r in reasons.to_pylist()]


def run(args) -> EvalReport:
    if getattr(args, "real", False):
        from evals.data.math_labelled import real_rows

        rows = real_rows()
    else:
        rows = labelled_set()
    gold = [r["label"] for r in rows]
    start = time.perf_counter()
    texts = [page_text(r["html"]) for r in rows]
    extract_s = time.perf_counter() - start
    table = pa.table({"html": [r["html"] for r in rows], "text": texts})
    signals_html = stage_class("math_signals_v1")({"field": "html"})(table).table
    signals_text = stage_class("math_signals_v1")({"field": "text", "markup": "text"})(table).table
    scored = stage_class("math_classifier_v1")({})(table).table
    preds = {
        "tags (visible formulas in the html, >= 1)": _keeps("math_filter_v1", {"require": "tags"}, signals_html),
        "symbols (text, >= 3, >= 0.5/kB)": _keeps("math_filter_v1", {"require": "symbols"}, signals_text),
        "tags or symbols": [a or b for a, b in zip(_keeps("math_filter_v1", {"require": "tags"}, signals_html),
                                                   _keeps("math_filter_v1", {"require": "symbols"}, signals_text))],
        f"classifier (text, p >= {args.threshold})": _keeps("math_classifier_filter_v1",
                                                           {"min_score": args.threshold}, scored),
    }
    preds["(tags or symbols) and classifier"] = [a and b for a, b in zip(preds["tags or symbols"],
                                                                        preds[f"classifier (text, p >= {args.threshold})"])]
    preds["tags or symbols or classifier"] = [a or b for a, b in zip(preds["tags or symbols"],
                                                                    preds[f"classifier (text, p >= {args.threshold})"])]
    preds["full config keep (configs/math.yaml)"] = full_config_keeps(rows)
    report = EvalReport(NAME)
    report.tables["precision / recall"] = [{"method": m, **_prf(p, gold)} for m, p in preds.items()]
    by_origin = defaultdict(list)
    for i, r in enumerate(rows):
        by_origin[r["origin"]].append(i)
    report.tables["kept share by origin (math origins: recall; others: false-positive rate)"] = [
        {"origin": o, "label": rows[idx[0]]["label"], "pages": len(idx),
         **{m: sum(p[i] for i in idx) / len(idx) for m, p in preds.items()}} for o, idx in sorted(by_origin.items())]
    report.notes.append(f"{len(rows)} pages ({sum(gold)} math); page text extraction {extract_s:.1f} s")
    report.notes.append("built by evals/data/math_labelled.py from ../shared/data " + (
        "(real pages only: Readability test pages, trafilatura benchmark pages, bundled WARCs; math labelled by "
        "reading)" if getattr(args, "real", False) else "(MATH test, GSM8K test, C4 200-299, Readability test pages labelled by "
        "hand, bundled WARCs)"))
    return report
