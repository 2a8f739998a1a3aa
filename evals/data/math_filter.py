"""`cidermill eval data math_filter`: precision/recall of the math filters and of configs/math.yaml's keep decision.

Two sets (evals/data/math_labelled.py says exactly how each is built):
- `--real` (the one that counts, issue 25): real pages only, labelled by reading, in a dev and a held-out
  half split by source: the Readability test pages and WARC responses (dev), trafilatura's benchmark
  pages by site (a third each for classifier training, dev, held-out; the training third is never
  evaluated), and 611 documentation pages from 31 Debian packages, split by package
  (evals/data/math_pages, labels and one-line reasons in labels.tsv; pages labelled `ambiguous` are
  left out). Thresholds are tuned on dev only; held-out is reported, never tuned on.
- default: the older set of MATH/GSM8K problems rendered into page shapes plus real non-math pages.

Methods: visible tags on the HTML, symbol density on the page text, either, the math classifier on the
page text, the reviewed-domain allow-list alone, and the full config's keep decision (its math stages
and their options read from configs/math.yaml, up to dedup).
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pyarrow as pa

from corpus.math.html_math import page_text
from corpus.registry import stage_class
from corpus.stages.math_filters import MathFilterConfig
from evals.data.math_labelled import labelled_set

from ..report import EvalReport

NAME = "math_filter"
HELP = "math tags/symbols/classifier/domains and configs/math.yaml's keep decision: P/R on real pages (dev, held-out)"
CONFIG = Path(__file__).resolve().parents[2] / "configs" / "math.yaml"
# the stages of configs/math.yaml that decide which pages are kept (dedup and decontamination follow)
DECIDING = ("math_signals_v1", "math_filter_v1", "math_qa_extract_v1", "math_classifier_v1", "math_domains_v1",
            "text_length_v1")
TARGET_PRECISION, TARGET_RECALL = 0.90, 0.80


def add_arguments(parser) -> None:
    parser.add_argument("--threshold", type=float, default=None,
                        help="classifier threshold for the classifier-alone row (default: configs/math.yaml's)")
    parser.add_argument("--real", action="store_true",
                        help="real pages only, dev and held-out halves (evals/data/math_labelled.py real_rows())")


def config_stages(path: Path = CONFIG) -> list[tuple[str, dict]]:
    """configs/math.yaml's deciding stages with their options; the HTML column is `html` here."""
    import yaml

    stages = []
    for entry in yaml.safe_load(path.read_text(encoding="utf-8"))["stages"]:
        (name, options), = entry.items()
        if name in DECIDING:
            options = dict(options or {})
            if name in ("math_signals_v1", "math_qa_extract_v1"):
                options["field"] = "html"
            stages.append((name, options))
    missing = set(DECIDING) - {n for n, _ in stages}
    if missing:
        raise ValueError(f"{path} has no {', '.join(sorted(missing))} stage; the eval replays those stages")
    return stages


def full_config_keeps(rows: list[dict]) -> list[bool]:
    """configs/math.yaml's keep decision up to dedup: visible-math signals -> tag-or-symbol filter -> Q&A /
    forum / page text -> classifier -> domains boost or deny -> minimum length (options from the YAML)."""
    table = pa.table({"html": [r["html"] for r in rows], "url": [r.get("url") or None for r in rows],
                      "i": list(range(len(rows)))})
    for name, options in config_stages():
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
    reasons = stage_class(stage_name)(options).reasons(table)
    if isinstance(reasons, tuple):  # (reasons, evidence): see corpus.stage.Filter.reasons
        reasons = reasons[0]
    return [r is None for r in reasons.to_pylist()]


def predictions(rows: list[dict], threshold: float) -> dict[str, list[bool]]:
    texts = [page_text(r["html"]) for r in rows]
    table = pa.table({"html": [r["html"] for r in rows], "text": texts, "url": [r.get("url") or None for r in rows]})
    signals_html = stage_class("math_signals_v1")({"field": "html"})(table).table
    signals_text = stage_class("math_signals_v1")({"field": "text", "markup": "text"})(table).table
    scored = stage_class("math_classifier_v1")({})(table).table
    # the tag and symbol thresholds of configs/math.yaml's math_filter_v1 (min_tags, min_tag_density, ...)
    filter_options = {k: v for k, v in next(o for n, o in config_stages() if n == "math_filter_v1").items()
                      if k != "require"}
    tags = _keeps("math_filter_v1", {**filter_options, "require": "tags"}, signals_html)
    symbols = _keeps("math_filter_v1", {**filter_options, "require": "symbols"}, signals_text)
    o = MathFilterConfig(**filter_options)
    clf = _keeps("math_classifier_filter_v1", {"min_score": threshold}, scored)
    domains = _keeps("math_domains_v1", {"field": "url", "mode": "gate"}, table)
    return {
        f"tags (visible formulas in the html, >= {o.min_tags}, >= {o.min_tag_density:g}/kB)": tags,
        f"symbols (text, >= {o.min_symbols}, >= {o.min_density:g}/kB)": symbols,
        "tags or symbols": [a or b for a, b in zip(tags, symbols)],
        f"classifier (text, p >= {threshold:g})": clf,
        "(tags or symbols) and classifier": [(a or b) and c for a, b, c in zip(tags, symbols, clf)],
        "domains (reviewed allow-list alone)": domains,
        "full config keep (configs/math.yaml)": full_config_keeps(rows),
    }


def _config_threshold() -> float:
    return next(o.get("min_score", 0.5) for n, o in config_stages() if n == "math_domains_v1")


def run(args) -> EvalReport:
    threshold = args.threshold if getattr(args, "threshold", None) is not None else _config_threshold()
    real = getattr(args, "real", False)
    if real:
        from evals.data.math_labelled import debian_rows, real_rows

        rows = real_rows()
        n_ambiguous = sum(1 for r in debian_rows(include_ambiguous=True) if r["label"] == "ambiguous")
    else:
        rows = [dict(r, split="dev") for r in labelled_set()]
    start = time.perf_counter()
    preds = predictions(rows, threshold)
    elapsed = time.perf_counter() - start
    report = EvalReport(NAME)
    table = []
    for split in ("dev", "heldout") if real else ("dev",):
        idx = [i for i, r in enumerate(rows) if r["split"] == split]
        gold = [rows[i]["label"] for i in idx]
        table += [{"split": split, "method": m, **_prf([p[i] for i in idx], gold)} for m, p in preds.items()]
        if real:
            keep = _prf([preds["full config keep (configs/math.yaml)"][i] for i in idx], gold)
            report.targets[f"{split}: full config keep precision >= {TARGET_PRECISION}"] = keep["precision"] >= TARGET_PRECISION
            report.targets[f"{split}: full config keep recall >= {TARGET_RECALL}"] = keep["recall"] >= TARGET_RECALL
    report.tables["precision / recall"] = table
    by_origin = defaultdict(list)
    for i, r in enumerate(rows):
        by_origin[(r["split"], r["origin"])].append(i)
    report.tables["kept share by origin (math origins: recall; others: false-positive rate)"] = [
        {"split": s, "origin": o, "pages": len(idx), "math": sum(rows[i]["label"] for i in idx),
         **{m: sum(p[i] for i in idx) / len(idx) for m, p in preds.items()}} for (s, o), idx in sorted(by_origin.items())]
    gold = [r["label"] for r in rows]
    report.notes.append(f"{len(rows)} pages ({sum(gold)} math); scoring {elapsed:.1f} s")
    if real:
        report.notes.append(f"{n_ambiguous} Debian pages labelled `ambiguous` on reading are left out (labels.tsv)")
        packages = defaultdict(set)
        for r in rows:
            if r["origin"].startswith("debian/"):
                packages[r["split"]].add(r["origin"].removeprefix("debian/").removeprefix("python-").removesuffix("-doc"))
        report.notes.append("dev: Readability test pages, WARC responses, trafilatura pages of the dev third of sites, "
                            f"Debian docs of {', '.join(sorted(packages['dev']))}; held-out: trafilatura's held-out "
                            f"third, Debian docs of {', '.join(sorted(packages['heldout']))}")
        report.notes.append("the Debian pages are package documentation, a different genre from forums and blogs; "
                            "real math forum/Q&A pages are not in the set (none exist in ../shared)")
    else:
        report.notes.append("built by evals/data/math_labelled.py from ../shared/data (MATH test, GSM8K test, C4 "
                            "200-299, Readability test pages labelled by hand, bundled WARCs)")
    return report
