"""`cidermill eval data extraction`: main-text quality of web extraction on eight development sets.

Sets (under ../shared/data/web_extraction; each folder's SOURCE.txt says where it comes from) and the
metric each one's gold supports (evals/data/_extraction_metrics.py, evals/data/_extraction_sets.py):

| set | gold | scored by |
|---|---|---|
| mozilla_readability | expected article HTML | shingle F1, snippet F1 (snippets derived from the gold) |
| trafilatura_eval | with/without snippets | snippet-shingle F1, snippet F1 |
| daniel_multilingual | cleaned main text (en/zh/el/pl/ru news; GPL-3.0, evaluation only) | shingle F1 |
| wcxb_dev | full main text + with/without snippets (articles, forums, products, listings, docs ...) | shingle F1, snippet F1 |
| postlight_parser_fixtures | the first words of the main text | start found (snippet recall) |
| harvest_web_forum_52 | the post bodies of forum threads | shingle F1, posts found |
| chinese_wce | hand-cleaned Chinese text (gb2312/gbk/utf-8 pages) | shingle F1 |
| smartreader_extra | Readability-style output | shingle F1 |

Each set is also broken down by language group (Latin, CJK, Cyrillic, Greek, other) and page kind (article,
forum, other), and the full-text sets are pooled by group and kind. `ours` is web_extract_v1's extraction
with its defaults (charset handling included; it sees the page's URL where the set gives one, as the stage
does); the peers are trafilatura with its defaults and resiliparse's main-content extraction, both on the
page decoded by the same charset code, so only extraction is compared. `--loso` adds the leave-one-set-out
check of the thresholds fitted on these sets (evals/data/_extraction_loso.py).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from evals.report import EvalReport
from evals.shared import shared_root

from ._extraction_langs import LANG_GROUPS
from ._extraction_metrics import GoldPage
from ._extraction_sets import ALL_SETS, SET_METRICS, in_split, load_pages, score

NAME = "extraction"
HELP = "main-text F1 of web extraction vs trafilatura and resiliparse on eight gold sets, by language and page kind"
OURS, PEER, RESILI = "ours (web_extract_v1)", "trafilatura default", "resiliparse main content"


def shared_dir() -> Path:
    return shared_root() / "web_extraction"


def default_gold_dir() -> Path:
    return shared_dir() / "mozilla_readability" / "test-pages"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default=str(shared_dir()), help="folder holding the eight set folders")
    parser.add_argument("--sets", default=",".join(ALL_SETS), help="comma-separated set names (default: all)")
    parser.add_argument("--limit", type=int, default=0, help="first N pages of each set only (0 = all)")
    parser.add_argument("--split", choices=["all", "tune", "check"], default="all",
                        help="half of each set by a hash of the page name (tune on one, check on the other)")
    parser.add_argument("--variants", action="store_true", help="also measure trafilatura's other settings")
    parser.add_argument("--loso", action="store_true",
                        help="also the leave-one-set-out check of the fitted thread thresholds (slow)")


def extractors(variants: bool = False) -> dict:
    import trafilatura

    from corpus.web.charset import decode_html
    from corpus.web.extract import extract_page, resiliparse_text

    def ours(content: bytes, url: str | None) -> str:
        return extract_page(content, None, url).text

    def traf(**options):
        return lambda c, url: trafilatura.extract(decode_html(c)[0], **options) or ""

    def resili(content: bytes, url: str | None) -> str:
        from resiliparse.parse.html import HTMLTree

        return resiliparse_text(HTMLTree.parse(decode_html(content)[0])).strip()

    out = {OURS: ours, PEER: traf(), RESILI: resili}
    if variants:
        out["trafilatura favor_precision"] = traf(favor_precision=True)
        out["trafilatura fast"] = traf(fast=True)
    return out


def run_extractor(fn, pages: list[GoldPage]) -> tuple[list[str], float]:
    fn(pages[0].source, pages[0].url)  # imports and first-call set-up are not throughput
    start = time.perf_counter()
    texts = [fn(p.source, p.url) for p in pages]
    return texts, len(pages) / (time.perf_counter() - start)


def _columns(name: str) -> tuple[str, ...]:
    """The per-extractor columns a set's gold gives meaning to."""
    metrics = SET_METRICS[name]
    cols: tuple[str, ...] = ()
    if "shingle_f1" in metrics:
        cols += ("shingle_p", "shingle_r", "shingle_f1")
    if "snippet_f1" in metrics:
        cols += ("snippet_p", "snippet_r", "snippet_f1")
    return cols + tuple(m for m in metrics if m not in cols) + ("empty",)


def _breakdown(key: str, values, texts: dict, pages: list[GoldPage], metrics: tuple, names=(OURS, PEER)) -> list:
    rows = []
    for value in values:
        idx = [i for i, p in enumerate(pages) if getattr(p, key) == value]
        if not idx:
            continue
        row = {key.replace("_", " "): value, "pages": len(idx)}
        for ex in names:
            s = score([texts[ex][i] for i in idx], [pages[i] for i in idx])
            for m in metrics:
                row[f"{m} {ex.split(' ')[0]}"] = s[m]
        rows.append(row)
    return rows


def run(args) -> EvalReport:
    import logging

    logging.getLogger("trafilatura").setLevel(logging.ERROR)
    report = EvalReport(NAME)
    fns = extractors(args.variants)
    summary, pooled_pages, pooled_texts, peer_scores = [], [], {OURS: [], PEER: []}, {}
    suffix = "" if args.split == "all" else f", {args.split} half"
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        try:
            pages = [p for p in load_pages(args.data, name, args.limit) if in_split(p.name, args.split)]
        except FileNotFoundError as exc:
            report.notes.append(f"{name}: not measured ({exc})")
            continue
        if not pages:
            continue
        metrics = SET_METRICS[name]
        texts, rows = {}, []
        for ex_name, fn in fns.items():
            texts[ex_name], speed = run_extractor(fn, pages)
            s = score(texts[ex_name], pages)
            rows.append({"extractor": ex_name, "pages": len(pages), **{c: s[c] for c in _columns(name)},
                         "docs_per_s": speed})
        report.tables[f"{name}{suffix}"] = rows
        report.tables[f"{name}{suffix} by language group"] = _breakdown("lang_group", LANG_GROUPS, texts, pages, metrics)
        report.tables[f"{name}{suffix} by page kind"] = _breakdown("kind", ("article", "forum", "other"), texts, pages,
                                                                   metrics)
        ours, peer, resili = rows[0], rows[1], rows[2]
        peer_scores[name] = peer[metrics[0]]
        for m in metrics:
            summary.append({"set": name, "pages": len(pages), "metric": m, "ours": ours[m], "trafilatura": peer[m],
                            "resiliparse": resili[m], "ours - trafilatura": ours[m] - peer[m],
                            "speed ours/trafilatura": ours["docs_per_s"] / peer["docs_per_s"]})
            report.targets[f"{name} {m}: ours {ours[m]:.4f} >= trafilatura {peer[m]:.4f}"] = ours[m] >= peer[m]
        if pages[0].gold_text is not None:
            pooled_pages += pages
            for ex in pooled_texts:
                pooled_texts[ex] += texts[ex]
    report.tables[f"summary{suffix} (each set's metrics; speed in one process)"] = summary
    if pooled_pages:
        for key, values in (("lang_group", LANG_GROUPS), ("kind", ("article", "forum", "other"))):
            report.tables[f"full-text sets pooled{suffix}, by {key.replace('_', ' ')} (shingle F1)"] = _breakdown(
                key, values, pooled_texts, pooled_pages, ("shingle_f1",))
    if args.loso:
        from ._extraction_loso import loso_tables

        for title, rows in loso_tables(args, peer_scores).items():
            report.tables[title] = rows
    return report
