"""`cidermill eval data extraction`: main-text precision/recall/F1 against gold text.

Gold: Mozilla Readability's test pages (../shared/data/web_extraction/mozilla_readability: 130
pages, `source.html` and the expected article `expected.html`). A page's score compares the bag
of lower-cased words (\\w+) of the extracted text with that of the gold article's text: precision =
shared words / extracted words, recall = shared words / gold words; the table shows the mean over
pages. `ours` is web_extract_v1's extraction (charset handling included), compared with
trafilatura called directly with its defaults on the same decoded page; `--variants` adds the other settings measured.
"""

from __future__ import annotations

import argparse
import re
import time
from collections import Counter
from pathlib import Path

from evals.report import EvalReport
from evals.shared import shared_root

NAME = "extraction"
HELP = "main-text precision/recall/F1 of web extraction vs trafilatura on the Readability gold pages"

_WORD = re.compile(r"\w+")


def default_gold_dir() -> Path:
    return shared_root() / "web_extraction" / "mozilla_readability" / "test-pages"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gold", default=str(default_gold_dir()), help="folder of <page>/{source,expected}.html")
    parser.add_argument("--limit", type=int, default=0, help="first N pages only (0 = all)")
    parser.add_argument("--variants", action="store_true", help="also measure the other extractor settings")


def load_gold(folder: str | Path, limit: int = 0) -> list[tuple[str, bytes, str]]:
    """(name, source bytes, gold text) per page, in name order."""
    import lxml.html

    pages = []
    for page in sorted(Path(folder).iterdir()):
        source, expected = page / "source.html", page / "expected.html"
        if source.is_file() and expected.is_file():
            gold = lxml.html.fromstring(expected.read_text(encoding="utf-8")).text_content()
            pages.append((page.name, source.read_bytes(), gold))
    return pages[:limit] if limit else pages


def word_prf(predicted: str, gold: str) -> tuple[float, float, float]:
    a = Counter(_WORD.findall(predicted.lower()))
    b = Counter(_WORD.findall(gold.lower()))
    shared = sum((a & b).values())
    p = shared / sum(a.values()) if a else 0.0
    r = shared / sum(b.values()) if b else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def extractors(variants: bool) -> dict:
    import trafilatura

    from corpus.web.charset import decode_html
    from corpus.web.extract import extract_page

    def ours(content: bytes) -> str:
        return extract_page(content, None, None).text

    def traf(**options):
        # The peer gets the page decoded by our charset code too, so only extraction is compared.
        return lambda c: trafilatura.extract(decode_html(c)[0], **options) or ""

    out = {"ours (web_extract_v1 hybrid)": ours, "trafilatura default": traf()}
    if variants:
        out["trafilatura favor_precision"] = traf(favor_precision=True)
        out["trafilatura fast"] = traf(fast=True)
        out["resiliparse main content"] = lambda c: extract_page(c, None, None, extractor="resiliparse").text
    return out


def score(fn, pages) -> dict:
    fn(pages[0][1])  # imports and first-call set-up are not throughput
    start = time.perf_counter()
    texts = [fn(source) for _, source, _ in pages]
    seconds = time.perf_counter() - start
    scores = [word_prf(t, gold) for t, (_, _, gold) in zip(texts, pages)]
    n = len(pages)
    return {"precision": sum(s[0] for s in scores) / n, "recall": sum(s[1] for s in scores) / n,
            "f1": sum(s[2] for s in scores) / n, "empty": sum(1 for t in texts if not t.strip()),
            "docs_per_s": n / seconds}


def run(args) -> EvalReport:
    import logging

    logging.getLogger("trafilatura").setLevel(logging.ERROR)
    report = EvalReport(NAME)
    if not Path(args.gold).is_dir():
        report.notes.append(f"gold folder {args.gold} not found; nothing measured")
        return report
    pages = load_gold(args.gold, args.limit)
    rows = []
    for name, fn in extractors(args.variants).items():
        rows.append({"extractor": name, "pages": len(pages), **score(fn, pages)})
    report.tables["main text vs gold (mean over pages)"] = rows
    ours, peer = rows[0], rows[1]
    report.targets[f"F1 ours {ours['f1']:.4f} >= trafilatura direct {peer['f1']:.4f}"] = ours["f1"] >= peer["f1"]
    report.notes.append(f"speed ratio ours/trafilatura = {ours['docs_per_s'] / peer['docs_per_s']:.1f}x "
                        "(one process; the benchmark in benchmarks/web_extract.py adds the WARC pages)")
    return report
