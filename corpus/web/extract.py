"""HTML page -> main text, title and publication date; the work behind the web_extract_v1 stage.

Extractors (measured with `cidermill eval data extraction` on two development sets, Mozilla
Readability's pages and trafilatura's evaluation pages, tuned on half of each; speed in
benchmarks/web_extract.py):
- `resiliparse`: resiliparse's main-content heuristics, without alt texts; ~6x trafilatura's speed,
  high recall, but it keeps boilerplate lines (bylines, captions, related links, cookie text).
- `trafilatura`: trafilatura's `extract` (with its fallbacks unless `trafilatura_fast`).
- `hybrid` (default): resiliparse's pick as blocks, without elements whose class/id names a
  boilerplate role, then block-level boilerplate removal
  (corpus/web/blocks.py: link density, length, context); when fewer than `fallback_below_chars`
  characters of confident main text remain (a page resiliparse did not understand: listings, odd
  layouts, tiny articles), trafilatura decides instead, in its fast mode unless `trafilatura_fast` is
  False (its own fallback extractors, readability-lxml and jusText, cost about half its time and scored
  no better on either development set as the second opinion).

Forum threads (cheap signals: the URL's path or the forum software's generator tag) keep their
comment sections: there the posts are the main content. All text is cleaned the same way: ruby
readings (<rt>/<rp>) are left out, soft hyphens and zero-width characters removed, NFC.
"""

from __future__ import annotations

import re
import signal
import threading
import unicodedata
from contextlib import contextmanager
from dataclasses import dataclass

from .blocks import BlockRules, main_blocks
from .charset import decode_html

_FORUM_URL = re.compile(r"forum|/threads?/|showthread|viewtopic|/topic/|/t/|board/|/discussion", re.I)
_FORUM_SOFTWARE = re.compile(r"vbulletin|phpbb|xenforo|discourse|mybb|invision|simple machines|smf|bbpress|"
                             r"nodebb|vanilla|flarum|punbb|fluxbb|woltlab|burning board", re.I)
_RUBY = re.compile(r"<(rt|rp)\b[^>]*>.*?</\1\s*>", re.I | re.S)
_INVISIBLE = re.compile("[\u00ad\u200b\u200c\u200d\u2060\ufeff]")
_SKIP = ["rt", "rp"]

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


def resiliparse_text(tree, *, comments: bool = False) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(tree, main_content=True, alt_texts=False, comments=comments, skip_elements=_SKIP)


def resiliparse_blocks(tree, *, comments: bool = False, skip: list[str] = ()) -> str:
    """resiliparse's main-content pick as minimal HTML with links (input to corpus/web/blocks.py);
    `skip`: CSS selectors of further elements to leave out."""
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(tree, preserve_formatting="minimal_html", main_content=True, alt_texts=False,
                              comments=comments, links=True, skip_elements=_SKIP + list(skip))


def trafilatura_text(html: str, *, url: str | None, fast: bool, favor_precision: bool,
                     comments: bool = False) -> str:
    import trafilatura

    if "<r" in html:
        html = _RUBY.sub("", html)
    return trafilatura.extract(html, url=url, fast=fast, favor_precision=favor_precision,
                               include_comments=comments) or ""


def clean_text(text: str) -> str:
    """Soft hyphens and zero-width characters out, NFC, outer whitespace stripped."""
    return unicodedata.normalize("NFC", _INVISIBLE.sub("", text)).strip()


def looks_like_forum(tree, url: str | None) -> bool:
    """A forum thread, by the URL's path or the forum software named in the generator tag."""
    if url:
        path = url.split("://", 1)[-1]
        if _FORUM_URL.search(path.split("/", 1)[-1] if "/" in path else "") or "forum" in path.split("/", 1)[0]:
            return True
    node = tree.document.query_selector('meta[name="generator"]')
    return node is not None and bool(_FORUM_SOFTWARE.search(node.getattr("content") or ""))


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
                 fallback_below_chars: int = 800, trafilatura_fast: bool | None = None,
                 favor_precision: bool = False, block_rules: BlockRules = BlockRules()) -> Page:
    from resiliparse.parse.html import HTMLTree

    html, charset = decode_html(content, content_type)
    tree = HTMLTree.parse(html)
    forum = looks_like_forum(tree, url)
    used = extractor
    title = _title(tree)
    if extractor == "trafilatura":
        text = trafilatura_text(html, url=url, fast=bool(trafilatura_fast), favor_precision=favor_precision, comments=forum)
    elif extractor == "resiliparse":
        text = resiliparse_text(tree, comments=forum)
    else:
        text, good_chars, _ = main_blocks(resiliparse_blocks(tree, comments=forum, skip=block_rules.skip_selectors()),
                                          block_rules, title=title)
        if block_rules.skip_class_words and good_chars < fallback_below_chars:
            # A skip word on the content's own container (`class="entry has-related"`) takes the article
            # with it: when the skip leaves too little text and loses most of it, the page is read without it
            # (checked only then, so that most pages are rendered once).
            plain, plain_chars, _ = main_blocks(resiliparse_blocks(tree, comments=forum), block_rules, title=title)
            if good_chars < block_rules.min_skip_kept * plain_chars:
                text, good_chars = plain, plain_chars
        used = "blocks"
        if good_chars < fallback_below_chars:
            fast = True if trafilatura_fast is None else trafilatura_fast
            fallback = trafilatura_text(html, url=url, fast=fast, favor_precision=favor_precision,
                                        comments=forum)
            if fallback.strip() or not text:
                text, used = fallback, "trafilatura"
    if forum:
        used += "_forum"
    return Page(text=clean_text(text), title=title, date=_date(tree), charset=charset, extractor=used)
