"""HTML page -> main text, title and publication date; the work behind the web_extract_v1 stage.

Extractors (chosen by measurement on the 130 Mozilla Readability pages with gold text; see
`cidermill eval data extraction` and benchmarks/web_extract.py):
- `resiliparse`: resiliparse's main-content heuristics, without alt texts and comments. Highest
  F1 there and ~15x faster than trafilatura, but it returns (almost) nothing for a few pages.
- `trafilatura`: trafilatura's `extract` (with its fallbacks unless `trafilatura_fast`).
- `hybrid` (default): resiliparse first; when it gives fewer than `fallback_below_chars`
  characters, trafilatura decides (the cheap extractor settles most pages, the careful one the rest).
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass

from .charset import decode_html

# Publication date, most specific first (Open Graph / schema.org / Dublin Core / <time>).
_DATE_SELECTORS = [
    ('meta[property="article:published_time"]', "content"),
    ('meta[itemprop="datePublished"]', "content"),
    ('meta[name="date"]', "content"),
    ('meta[name="dc.date"]', "content"),
    ('meta[name="DC.date.issued"]', "content"),
    ('meta[name="pubdate"]', "content"),
    ('meta[property="og:published_time"]', "content"),
    ("time[datetime]", "datetime"),
]


class ExtractTimeout(Exception):
    """A page took longer than the per-record limit."""


@contextmanager
def time_limit(seconds: float):
    """Raise ExtractTimeout in this thread after `seconds` (SIGALRM; main thread only, else no limit).

    Pure-Python work (trafilatura) is interrupted; a C call (resiliparse) finishes first, which is
    why pages are also capped in bytes before extraction.
    """
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise ExtractTimeout(f"extraction took more than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Page:
    text: str
    title: str | None
    date: str | None
    charset: str
    extractor: str


def resiliparse_text(tree) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(tree, main_content=True, alt_texts=False, comments=False)


def trafilatura_text(html: str, *, url: str | None, fast: bool, favor_precision: bool) -> str:
    import trafilatura

    return trafilatura.extract(html, url=url, fast=fast, favor_precision=favor_precision,
                               include_comments=False) or ""


def _title(tree) -> str | None:
    title = (tree.title or "").strip()
    if not title:
        og = tree.document.query_selector('meta[property="og:title"]')
        title = (og.getattr("content") or "").strip() if og is not None else ""
    return title or None


def _date(tree) -> str | None:
    for selector, attr in _DATE_SELECTORS:
        node = tree.document.query_selector(selector)
        if node is not None:
            value = (node.getattr(attr) or "").strip()
            if value:
                return value[:64]
    return None


def extract_page(content: bytes, content_type: str | None, url: str | None, *, extractor: str = "hybrid",
                 fallback_below_chars: int = 200, trafilatura_fast: bool = False,
                 favor_precision: bool = False) -> Page:
    from resiliparse.parse.html import HTMLTree

    html, charset = decode_html(content, content_type)
    tree = HTMLTree.parse(html)
    used = extractor
    if extractor == "trafilatura":
        text = trafilatura_text(html, url=url, fast=trafilatura_fast, favor_precision=favor_precision)
    else:
        text = resiliparse_text(tree)
        used = "resiliparse"
        if extractor == "hybrid" and len(text) < fallback_below_chars:
            fallback = trafilatura_text(html, url=url, fast=trafilatura_fast, favor_precision=favor_precision)
            if len(fallback) > len(text):
                text, used = fallback, "trafilatura"
    return Page(text=text.strip(), title=_title(tree), date=_date(tree), charset=charset, extractor=used)
