"""`cidermill eval data extraction`: main-text quality of web extraction on two development sets.

Sets, metrics and page kinds are defined in evals/data/_extraction_metrics.py (shingle metric and
snippet metric, on mozilla_readability and trafilatura_eval under ../shared/data/web_extraction).
`ours` is web_extract_v1's extraction with its defaults (charset handling included; it sees the page's
URL where the set gives one, as the stage does); the peers are
trafilatura called with its defaults and resiliparse's main-content extraction, both on the page
decoded by the same charset code, so only extraction is compared. `--split tune|check` keeps half of
each set (by a hash of the page name) for tuning and the other half for checking.
"""

from __future__ import annotations

import argparse
import time
import zlib
from pathlib import Path

from evals.report import EvalReport
from evals.shared import shared_root

from ._extraction_metrics import GoldPage, load_readability, load_trafilatura_eval, summarize

NAME = "extraction"
HELP = "main-text shingle/snippet F1 of web extraction vs trafilatura and resiliparse on two gold sets"


def shared_dir() -> Path:
    return shared_root() / "web_extraction"


def default_gold_dir() -> Path:
    return shared_dir() / "mozilla_readability" / "test-pages"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gold", default=str(default_gold_dir()), help="Readability folder of <page>/{source,expected}.html")
    parser.add_argument("--trafilatura-eval", default=str(shared_dir() / "trafilatura_eval"),
                        help="folder with evaldata.json and files/")
    parser.add_argument("--limit", type=int, default=0, help="first N pages of each set only (0 = all)")
    parser.add_argument("--split", choices=["all", "tune", "check"], default="all",
                        help="half of each set by a hash of the page name (tune on one, check on the other)")
    parser.add_argument("--variants", action="store_true", help="also measure trafilatura's other settings")


def in_split(name: str, split: str) -> bool:
    if split == "all":
        return True
    return (zlib.crc32(name.encode()) % 2 == 0) == (split == "tune")


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

    out = {"ours (web_extract_v1)": ours, "trafilatura default": traf(), "resiliparse main content": resili}
    if variants:
        out["trafilatura favor_precision"] = traf(favor_precision=True)
        out["trafilatura fast"] = traf(fast=True)
    return out


def run_extractor(fn, pages: list[GoldPage]) -> tuple[list[str], float]:
    fn(pages[0].source, pages[0].url)  # imports and first-call set-up are not throughput
    start = time.perf_counter()
    texts = [fn(p.source, p.url) for p in pages]
    return texts, len(pages) / (time.perf_counter() - start)


def run(args) -> EvalReport:
    import logging

    logging.getLogger("trafilatura").setLevel(logging.ERROR)
    report = EvalReport(NAME)
    sets = {}
    if Path(args.gold).is_dir():
        sets["mozilla_readability"] = load_readability(args.gold, args.limit)
    else:
        report.notes.append(f"Readability folder {args.gold} not found; not measured")
    if (Path(args.trafilatura_eval) / "evaldata.json").is_file():
        sets["trafilatura_eval"] = load_trafilatura_eval(args.trafilatura_eval, args.limit)
    else:
        report.notes.append(f"trafilatura_eval folder {args.trafilatura_eval} not found; not measured")
    fns = extractors(args.variants)
    for set_name, pages in sets.items():
        pages = [p for p in pages if in_split(p.name, args.split)]
        rows, kinds, halves = [], [], []
        for ex_name, fn in fns.items():
            texts, speed = run_extractor(fn, pages)
            rows.append({"extractor": ex_name, **summarize(texts, pages), "docs_per_s": speed})
            if args.split == "all":
                for half in ("tune", "check"):
                    sel = [(t, p) for t, p in zip(texts, pages) if in_split(p.name, half)]
                    s = summarize([t for t, _ in sel], [p for _, p in sel])
                    halves.append({"half": half, "extractor": ex_name, "pages": s["pages"],
                                   "shingle_f1": s["shingle_f1"], "snippet_f1": s["snippet_f1"]})
            for kind in sorted({p.kind for p in pages}):
                sel = [(t, p) for t, p in zip(texts, pages) if p.kind == kind]
                s = summarize([t for t, _ in sel], [p for _, p in sel])
                kinds.append({"kind": kind, "extractor": ex_name, "pages": s["pages"],
                              "shingle_f1": s["shingle_f1"], "snippet_f1": s["snippet_f1"]})
        suffix = "" if args.split == "all" else f", {args.split} half"
        report.tables[f"{set_name}{suffix}"] = rows
        report.tables[f"{set_name}{suffix} by page kind"] = kinds
        if halves:
            report.tables[f"{set_name} by half (tuned on 'tune')"] = halves
        ours, peer = rows[0], rows[1]
        for metric in ("shingle_f1", "snippet_f1"):
            report.targets[f"{set_name} {metric}: ours {ours[metric]:.4f} >= trafilatura {peer[metric]:.4f}"] = (
                ours[metric] >= peer[metric])
        report.notes.append(f"{set_name}: speed ratio ours/trafilatura = "
                            f"{ours['docs_per_s'] / peer['docs_per_s']:.1f}x (one process)")
    return report
