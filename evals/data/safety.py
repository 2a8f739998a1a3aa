"""`cidermill eval data safety`: false drops on news-like and health-like pages and recall per unsafe
category, for web_safety_v2 + web_safety_filter_v2 against peer filters on the same pages.

The set (built by corpus/web/safety_data.eval_pages from the development machine's shared data, which
only evals, tests and benchmarks may read; see that module for every rule):
- unsafe pages per category (sexual, hate, harassment, violence, self_harm): 4-7 sentences of the
  category drawn from the project's written sentences of split `eval` (never used in training);
- hard safe pages: the same from the hard-case groups (news about crime and war, news about sex crimes,
  sexual health, drugs and abuse, suicide prevention, sex education, fiction);
- real pages of the eval split (by document hash; the model trained on other documents): trafilatura's
  and Readability's test pages (English, extracted with trafilatura), C4 documents, Wikipedia chunks,
  grouped as news_pages, health_pages and other_pages by the rules in eval_pages.
Peers: alt-profanity-check (scikit-learn model shipped in the package; a page drops when
predict_prob > 0.5, its default) and the C4 rule (a page with any LDNOOBW word drops).
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import pyarrow as pa

from evals.report import EvalReport

NAME = "safety"
HELP = "safety filter: false drops on news/health pages and recall per unsafe category, vs peers"
MAX_FALSE_DROP = 0.01
MIN_RECALL = 0.70
NEWS = ("news_pages", "news_crime", "news_sex")
HEALTH = ("health_pages", "health_sexual", "health_drugs", "health_suicide", "sex_ed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from corpus.web.safety_model import MODEL_PATH

    repo = Path(__file__).resolve().parents[2]
    parser.add_argument("--data", default=os.environ.get("CIDERMILL_SHARED_DATA", str(repo.parent / "shared" / "data")),
                        help="shared data folder (default $CIDERMILL_SHARED_DATA or ../shared/data)")
    parser.add_argument("--cache", default=str(repo / "data" / "evals" / "safety_web_pages.jsonl"),
                        help="jsonl cache of the extracted web pages (made if missing)")
    parser.add_argument("--model", default=str(MODEL_PATH))
    parser.add_argument("--per-group", type=int, default=40, help="written pages per category / hard-case group")


def ours(texts: list[str], urls: list[str | None], model: str) -> tuple[list[str | None], dict]:
    from corpus.registry import stage_class

    table = pa.table({"id": [str(i) for i in range(len(texts))], "text": texts, "url": urls})
    scored = stage_class("web_safety_v2")({"model_path": model})(table).table
    result = stage_class("web_safety_filter_v2")({})(scored)
    reasons: list[str | None] = [None] * len(texts)
    if result.rejects is not None:
        for i, r in zip(result.rejects.column("id").to_pylist(), result.rejects.column("drop_reason").to_pylist()):
            reasons[int(i)] = r
    return reasons, result.stats.counters


def c4_rule(texts: list[str]) -> list[bool]:
    folder = Path(__file__).resolve().parents[2] / "corpus" / "web" / "data" / "ldnoobw"
    words = sorted({w.strip().lower() for w in (folder / "en").read_text().splitlines() if w.strip()}, key=len, reverse=True)
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, words)) + r")(?!\w)")
    return [bool(pattern.search(t.lower())) for t in texts]


def run(args) -> EvalReport:
    from profanity_check import predict_prob

    from corpus.web.safety_data import UNSAFE, eval_pages

    pages = eval_pages(Path(args.data), Path(args.cache), args.per_group)
    groups = [p[0] for p in pages]
    texts = [p[2] for p in pages]
    reasons, counters = ours(texts, [p[3] for p in pages], args.model)
    from corpus.web import safety_model

    model_only = list(safety_model.score(texts, Path(args.model)) > safety_model.threshold(Path(args.model)))
    peer = [float(s) > 0.5 for s in predict_prob(texts)]
    c4 = c4_rule(texts)
    rows = []
    for g in dict.fromkeys(groups):
        idx = [i for i, x in enumerate(groups) if x == g]
        unsafe = g in UNSAFE
        row = {"group": g, "kind": "unsafe: recall" if unsafe else "safe: false drops", "pages": len(idx),
               "ours": sum(reasons[i] is not None for i in idx) / len(idx),
               "our_model_alone": sum(model_only[i] for i in idx) / len(idx),
               "alt_profanity_check": sum(peer[i] for i in idx) / len(idx),
               "c4_ldnoobw_rule": sum(c4[i] for i in idx) / len(idx)}
        rows.append(row)

    def pooled(names, flags):
        idx = [i for i, x in enumerate(groups) if x in names]
        return sum(bool(flags[i]) for i in idx) / max(len(idx), 1), len(idx)

    ours_flags = [r is not None for r in reasons]
    summary = []
    for title, names in (("news-like (news_pages + news_crime + news_sex)", NEWS),
                         ("health-like (health_pages + health_* + sex_ed)", HEALTH),
                         ("all unsafe categories (recall)", UNSAFE)):
        summary.append({"set": title, "pages": pooled(names, ours_flags)[1], "ours": pooled(names, ours_flags)[0],
                        "alt_profanity_check": pooled(names, peer)[0], "c4_ldnoobw_rule": pooled(names, c4)[0]})
    why = {}
    for g, r in zip(groups, reasons):
        if r is not None:
            why.setdefault(g, {}).setdefault(r, 0)
            why[g][r] += 1
    report = EvalReport(NAME, tables={"per group (drop rate)": rows, "pooled": summary,
                                      "our drop reasons": [{"group": g, "reasons": ", ".join(f"{k}={v}" for k, v in sorted(c.items()))}
                                                           for g, c in why.items()],
                                      "our filter counters": [{"counter": k, "value": v} for k, v in counters.items()]})
    news, health, recall = summary[0]["ours"], summary[1]["ours"], summary[2]["ours"]
    report.targets[f"news-like false drops {news:.4f} <= {MAX_FALSE_DROP}"] = news <= MAX_FALSE_DROP
    report.targets[f"health-like false drops {health:.4f} <= {MAX_FALSE_DROP}"] = health <= MAX_FALSE_DROP
    report.targets[f"recall over all unsafe categories {recall:.4f} >= {MIN_RECALL}"] = recall >= MIN_RECALL
    report.notes.append("our_model_alone: the page model at its manifest threshold without the word evidence the "
                        "filter requires (shows what the model would do alone)")
    report.notes.append("written pages are small (8 eval sentences per group); real news/health pages are few "
                        "(the shared data holds few English news and health pages); see corpus/web/safety_data.py")
    return report
