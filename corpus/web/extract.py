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
  no better on either development set as the second opinion). When at least `second_opinion_headings`
  headings inside the kept text lost the text under them (resiliparse's pick or the block rules dropped
  a section: a cheap, targeted signal, about 5% of pages), trafilatura reads the page as well and the
  lines it has, inside our text, that we lack are added in page order (`fill_gaps`). Not on pages over
  `second_opinion_max_chars` (500k characters of HTML): trafilatura's time grows with the page, and
  one 1 MB page cost as much as the rest of the speed benchmark's second opinions together.

Forum threads (cheap signals: the URL's path or the forum software's generator tag) keep their
comment sections: there the posts are the main content. All text is cleaned the same way: ruby
readings (<rt>/<rp>) are left out, soft hyphens and zero-width characters removed, NFC.
"""

from __future__ import annotations

import re
import signal
import threading
import unicodedata
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

from .blocks import Block, BlockRules, main_blocks
from .charset import decode_html
from .threads import Thread, ThreadRules, find_thread, is_main_content, parse

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
                              comments=comments, links=True,
                              # the skip selectors as one selector list: the same output, ~10% faster
                              skip_elements=_SKIP + ([", ".join(skip)] if skip else []))


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


def forum_url(url: str | None) -> bool:
    """The URL alone names a forum thread (its path, or "forum" in the host)."""
    if not url:
        return False
    path = url.split("://", 1)[-1]
    return bool(_FORUM_URL.search(path.split("/", 1)[-1] if "/" in path else "")) or "forum" in path.split("/", 1)[0]


def looks_like_forum(tree, url: str | None) -> bool:
    """A forum thread, by the URL's path or the forum software named in the generator tag."""
    if forum_url(url):
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
    """The first of `_DATE_SELECTORS` whose first match has a non-blank value (that value, at most 64
    characters), as if each selector were queried in turn; but the <meta> selectors are one query (a
    selector list, whose few matches come back in document order), not seven walks over the page."""
    found: dict = {}
    for node in tree.document.query_selector_all(_META_DATE_LIST):
        for attr in _META_ATTRS:
            value = node.getattr(attr)
            if value is not None:
                found.setdefault((attr, value), node)  # the first match in document order, as query_selector
    for (selector, attr), key in zip(_DATE_SELECTORS, _DATE_KEYS):
        node = tree.document.query_selector(selector) if key is None else found.get(key)
        if node is not None:
            value = (node.getattr(attr) or "").strip()
            if value:
                return value[:64]
    return None


def _selector_key(selector: str) -> tuple[str, str] | None:
    """('name', 'date') for 'meta[name="date"]' (lexbor compares the value exactly, case included, as
    the dict lookup does); None for the other selectors, which are queried on their own."""
    m = re.fullmatch(r'meta\[([a-z]+)="([^"]+)"\]', selector)
    return (m.group(1), m.group(2)) if m else None


_DATE_KEYS = [_selector_key(selector) for selector, _ in _DATE_SELECTORS]
_META_ATTRS = tuple(sorted({key[0] for key in _DATE_KEYS if key}))
_META_DATE_LIST = ", ".join(selector for (selector, _), key in zip(_DATE_SELECTORS, _DATE_KEYS) if key)


_WORD = re.compile(r"\w+")
_MIN_DATED_ELEMENTS = 3  # <time>/datetime= count that makes a page worth the thread analysis
_KNOWN_SHARE = 0.5  # a line of the second opinion with this share of its word trigrams in ours is known


def lost_sections(blocks: list[Block]) -> int:
    """Headings inside the kept text (between its first and last good block) that were dropped for want
    of good text under them, links aside: sections whose text resiliparse's pick or the block rules lost."""
    good = [i for i, b in enumerate(blocks) if b.label == "good"]
    if not good:
        return 0
    return sum(1 for b in blocks[good[0]:good[-1] + 1]
               if b.heading and b.label == "bad" and b.link_density <= 0.5)


def _trigrams(line: str) -> set[tuple[str, ...]]:
    words = _WORD.findall(line.casefold())
    if len(words) < 3:
        return {tuple(words)} if words else set()
    return {tuple(words[i:i + 3]) for i in range(len(words) - 2)}


def fill_gaps(text: str, other: str) -> tuple[str, int]:
    """`text` with the lines of `other` (a second extractor's text of the same page) that it lacks, each
    placed after the line of `text` where `other`'s preceding known line ends, and only inside `text`
    (before its first or after its last line they would be the edges' boilerplate). A line of `other`
    counts as known when at least half of its word trigrams are in `text`. Returns (text, lines added)."""
    lines = text.split("\n")  # blank lines (a <pre>'s) stay where they are
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    line_of: dict[tuple[str, ...], int] = {}
    for i, line in enumerate(lines):
        for gram in _trigrams(line):
            line_of.setdefault(gram, i)
    after: dict[int, list[str]] = {}
    at = -1
    for line in other.split("\n"):
        grams = _trigrams(line)
        if not grams:
            continue
        hits = sorted(line_of[g] for g in grams if g in line_of)
        if len(hits) >= _KNOWN_SHARE * len(grams):
            at = max(at, hits[int(0.9 * (len(hits) - 1))])  # where this line ends in `text` (a stray trigram aside)
        elif 0 <= at < last:
            after.setdefault(at, []).append(line.strip())
    if not after:
        return text, 0
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        out += after.get(i, [])
    return "\n".join(out), sum(map(len, after.values()))


def _dated_elements(html: str) -> int:
    """<time> elements and datetime attributes: a cheap hint that the page lists dated posts."""
    return html.count("<time") + html.count("datetime=")


def article_blocks(tree, forum: bool, block_rules: BlockRules, *, title: str | None,
                   fallback_below_chars: int) -> tuple[str, int, list[Block]]:
    """resiliparse's main-content pick, less the boilerplate blocks: (text, its weighted length, blocks)."""
    text, good_chars, blocks = main_blocks(resiliparse_blocks(tree, comments=forum, skip=block_rules.skip_selectors()),
                                           block_rules, title=title)
    if block_rules.skip_class_words and good_chars < fallback_below_chars:
        # A skip word on the content's own container (`class="entry has-related"`) takes the article
        # with it: when the skip leaves too little text and loses most of it, the page is read without it
        # (checked only then, so that most pages are rendered once).
        plain, plain_chars, plain_blocks = main_blocks(resiliparse_blocks(tree, comments=forum), block_rules,
                                                       title=title)
        if good_chars < block_rules.min_skip_kept * plain_chars:
            return plain, plain_chars, plain_blocks
    return text, good_chars, blocks


def thread_worth_a_look(html: str, good_chars: int, forum: bool, *, fallback_below_chars: int) -> bool:
    """Whether to look for a list of posts at all (a second parse of the page costs about half an article's
    extraction): a forum URL or generator, too little article text, or dated elements on the page."""
    return forum or good_chars < fallback_below_chars or _dated_elements(html) >= _MIN_DATED_ELEMENTS


def main_thread(html: str, text: str, rules: ThreadRules) -> Thread | None:
    """The page's posts when its main content is a thread (corpus/web/threads.py), else None: a list of
    posts found where the article extractor's running text (`text`) lies mostly inside the posts, with less
    than an article's worth outside them (not comments under an article, not teasers beside one). Call it
    only where `thread_worth_a_look` says so (it parses the page a second time)."""
    thread = find_thread(parse(html), rules)
    return thread if thread and is_main_content(text, thread, rules) else None


def extract_page(content: bytes, content_type: str | None, url: str | None, *, extractor: str = "hybrid",
                 fallback_below_chars: int = 800, trafilatura_fast: bool | None = None,
                 favor_precision: bool = False, block_rules: BlockRules = BlockRules(),
                 second_opinion_headings: int = 2, second_opinion_max_chars: int = 500_000,
                 thread_rules: ThreadRules | None = ThreadRules(),
                 other_language: Callable[[str], bool] | None = None) -> Page:
    """`other_language` (hybrid only): called with the cleaned resiliparse text when the page would go on to
    the costly steps (the thread analysis, trafilatura's fallback or second opinion); True keeps that text
    as the page's and skips them (extractor `blocks_other_language`): for a pipeline whose language filter
    drops the page anyway."""
    from resiliparse.parse.html import HTMLTree

    html, charset = decode_html(content, content_type)
    tree = HTMLTree.parse(html)
    forum = looks_like_forum(tree, url)
    used = extractor
    title = _title(tree)
    if extractor == "trafilatura":
        text = trafilatura_text(html, url=url, fast=bool(trafilatura_fast), favor_precision=favor_precision,
                                comments=forum)
    elif extractor == "resiliparse":
        text = resiliparse_text(tree, comments=forum)
    else:
        text, good_chars, blocks = article_blocks(tree, forum, block_rules, title=title,
                                                  fallback_below_chars=fallback_below_chars)
        used = "blocks"
        fast = True if trafilatura_fast is None else trafilatura_fast
        # the costly steps, each decided once: a second parse for the posts, trafilatura's fallback or its
        # second opinion; all skipped where the language filter downstream drops the page anyway
        look_for_thread = bool(thread_rules) and thread_worth_a_look(html, good_chars, forum,
                                                                     fallback_below_chars=fallback_below_chars)
        short = good_chars < fallback_below_chars
        second_opinion = (not short and bool(second_opinion_headings) and len(html) <= second_opinion_max_chars
                          and lost_sections(blocks) >= second_opinion_headings)
        skip = (other_language is not None and (look_for_thread or short or second_opinion)
                and bool(cleaned := clean_text(text)) and other_language(cleaned))
        thread = main_thread(html, text, thread_rules) if look_for_thread and not skip else None
        if skip:
            used = "blocks_other_language"
        elif thread:
            text, used = thread.text, "posts"
        elif short:
            fallback = trafilatura_text(html, url=url, fast=fast, favor_precision=favor_precision,
                                        comments=forum)
            if fallback.strip() or not text:
                text, used = fallback, "trafilatura"
        elif second_opinion:
            other = trafilatura_text(html, url=url, fast=fast, favor_precision=favor_precision, comments=forum)
            text, added = fill_gaps(text, other)
            used = "blocks+trafilatura" if added else used
    if forum:
        used += "_forum"
    return Page(text=clean_text(text), title=title, date=_date(tree), charset=charset, extractor=used)
