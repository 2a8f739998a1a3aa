"""Forum threads and other lists of posts: the post bodies of a page, found from its repeated structure.

A thread page holds the same unit again and again (a post: author, date, body, buttons), and the main
text is the bodies. Nothing here knows forum software or its class names: the bodies are found from the
page's own repetition.

- Running text (text nodes of at least `long_chars` characters, ideographs x3, outside links) votes for each
  of its ancestors that has a signature: tag + class tokens (digits as #) + an id with a number in it
  (`post_message_#`). Elements with one signature form a group; a group that holds at least
  `min_long_share` of the page's running text, in at least `min_posts` different members, is a candidate.
- Between two posts stand the next post's author and date; between two paragraphs of an article, nothing
  or a heading. A candidate is a list of posts when at least `min_dated_gaps` of the gaps between its
  members hold a date or time (a `<time>` element, a year, hh:mm, a numeric date, CJK date characters):
  script-independent, where "Reply" and "Quote" are not.
- Of the candidates that pass, the deepest wins: the body inside the post, not the post with its user
  box, join date and post count (per-post chrome).
- Each member is then rendered as text (blocks as lines; scripts, forms, buttons and elements whose class or
  id names a signature left out). Quotes of earlier posts stay: they are part of the post as written, and
  the forum gold (WEB-FORUM-52) keeps them.

The caller decides whether the page *is* a thread (corpus/web/extract.py): a blog's comment list is a list of
posts too, but there the article is the main text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .blocks import weighted_chars

_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"[ \t\r\n\f\v\u00a0]+")
# A date or time in the text between two posts: a <time> element (marked U+E000 in the text), a year, hh:mm,
# a numeric date, or a number with a CJK/Korean date unit.
_DATED = re.compile(r"\ue000|(?<!\d)(?:19|20)\d\d(?!\d)|\d:[0-5]\d|\d{1,2} ?[./-] ?\d{1,2} ?[./-] ?\d{2,4}"
                    r"|\d ?[年月日号時时분일]")
_SIGNATURE = re.compile(r"signature|(?:^|[-_\s])sig(?:[-_\s\d]|$)", re.I)
_NOT_TEXT = ("script", "style", "template", "select", "option", "button", "textarea", "noscript")
_BLOCK_TAGS = frozenset({"p", "div", "li", "ul", "ol", "blockquote", "pre", "table", "tr", "dd", "dt", "dl",
                         "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "header", "footer", "aside",
                         "figure", "figcaption", "hr", "form", "fieldset", "details", "summary", "center"})


@dataclass(frozen=True, kw_only=True)
class ThreadRules:
    min_posts: int = 3  # members of the group that hold running text
    min_long_share: float = 0.8  # share of the page's running text inside the group
    min_dated_gaps: float = 0.5  # share of the gaps between members that hold a date or time
    long_chars: int = 80  # a text node this long (ideographs x3) is running text
    # the page is read as a thread only when this share of the article extractor's running text is in the
    # posts (else the posts are comments under an article, or teasers beside one) ...
    min_main_inside: float = 0.5
    # ... and less than this much of it (characters, ideographs x3) is outside them: an article's worth of
    # running text outside the posts is the article, the posts its comments (or a live blog's entries)
    max_outside_chars: int = 2000


@dataclass
class Thread:
    posts: list[str]
    signature: str  # the bodies' tag.class#id pattern, for the record
    long_share: float
    dated_gaps: float

    @property
    def text(self) -> str:
        return "\n\n".join(self.posts)


def _signature(el) -> str | None:
    """tag + class (digits as #) + an id with a number (digits as #); None without either."""
    cls = el.get("class")
    ident = el.get("id")
    ident = _DIGITS.sub("#", ident) if ident and _DIGITS.search(ident) else ""
    if not cls and not ident:
        return None
    return f"{el.tag}.{_DIGITS.sub('#', ' '.join(cls.split())) if cls else ''}#{ident}"


def _left_out(el) -> bool:
    if el.tag in _NOT_TEXT:
        return True
    names = (el.get("class") or "") + " " + (el.get("id") or "")
    return bool(_SIGNATURE.search(names))


def parse(html: str):
    """lxml's HTML tree of `html`, scripts and styles removed (their text is not the page's)."""
    from lxml import etree

    # lxml's plain parser: lxml.html's element classes cost a Python lookup per element visited
    root = etree.fromstring(html.encode("utf-8", "surrogatepass"),
                            etree.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True))
    if root is None:
        return None
    etree.strip_elements(root, "script", "style", "template", with_tail=False)
    for el in root.iter("time"):  # a date marker the gap test can see, whatever the text says
        el.text = "\ue000" + (el.text or "")
    return root


def _votes(root, long_chars: int) -> tuple[dict, float]:
    """signature -> {member element: running-text characters}, and the page's running-text characters."""
    votes: dict[str, dict] = {}
    total = 0.0
    seen: dict = {}  # element -> its signature, or False when it is left out (a link, a signature)
    short = long_chars // 3  # the shortest text that can weigh long_chars (ideographs x3)
    for node in root.xpath(f"//body//text()[string-length(normalize-space(.)) >= {short}]"):
        owner = node.getparent()
        if node.is_tail:
            owner = owner.getparent()
        if owner is None:
            continue
        n = weighted_chars(node.strip())  # (inner runs of spaces counted as they are: cheaper, near enough)
        if n < long_chars:
            continue
        outermost: dict[str, object] = {}  # signature -> its outermost element on this text's chain
        for el in (owner, *owner.iterancestors()):
            sig = seen.get(el, 0)
            if sig == 0:
                sig = seen[el] = False if el.tag == "a" or _left_out(el) else _signature(el)
            if sig is False:
                break  # link text, or a signature's
            if sig is not None and el.tag != "body":
                outermost[sig] = el
        else:
            total += n
            for sig, el in outermost.items():
                members = votes.setdefault(sig, {})
                members[el] = members.get(el, 0) + n
    return votes, total


def _members(root, sig: str, hit: dict) -> list:
    """Every outermost element of the page with signature `sig`, in document order (`hit`: those that
    running text voted for; where they share one class and no numbered id, lxml's XPath finds the rest)."""
    tag = sig.split(".", 1)[0]
    classes = {el.get("class") for el in hit}
    cls = classes.pop() if len(classes) == 1 else None
    if cls and sig.endswith("#") and '"' not in cls:
        found = root.xpath(f'//{tag}[@class="{cls}"]')
    else:
        found = [el for el in root.iter(tag) if (el.get("class") or el.get("id")) and _signature(el) == sig]
    inside = set(found)
    return [el for el in found if not any(a in inside for a in el.iterancestors())]


def _dated_gaps(root, members: list) -> float:
    """Share of the gaps between consecutive members (text after one, before the next) holding a date."""
    full = _text(root)
    spans, at = [], 0
    for el in members:
        text = _text(el)
        start = full.find(text, at)
        if start < 0:
            return 0.0
        at = start + len(text)
        spans.append((start, at))
    gaps = [full[a[1]:b[0]] for a, b in zip(spans, spans[1:])]
    return sum(1 for g in gaps if _DATED.search(g)) / len(gaps) if gaps else 0.0


def _text(el) -> str:
    from lxml import etree

    return etree.tostring(el, method="text", encoding="unicode", with_tail=False)


def _depth(el) -> int:
    return sum(1 for _ in el.iterancestors())


def render(el) -> str:
    """An element's text: block elements and <br> as line breaks, spaces collapsed, left-out parts skipped.
    A line break in the HTML source is a space (as a browser shows it), except inside <pre>."""
    parts: list[str] = []

    def flat(text: str, pre: bool) -> str:
        return text if pre else _SPACES.sub(" ", text)

    def walk(node, pre: bool) -> None:
        pre = pre or node.tag == "pre"
        if node.text:
            parts.append(flat(node.text, pre))
        for child in node:
            if isinstance(child.tag, str) and not _left_out(child):
                block = child.tag in _BLOCK_TAGS or child.tag == "br"
                if block:
                    parts.append("\n")
                walk(child, pre)
                if block:
                    parts.append("\n")
            if child.tail:
                parts.append(flat(child.tail, pre))

    walk(el, False)
    lines = (_SPACES.sub(" ", line).strip() for line in "".join(parts).replace("\ue000", "").split("\n"))
    return "\n".join(line for line in lines if line)


_NO_SPACE = re.compile(r"\s+")
_PROBE = 40  # characters of a line looked up in the posts


def placement(text: str, thread: Thread, rules: ThreadRules = ThreadRules()) -> tuple[float, int]:
    """(share, by characters, of `text`'s running-text lines found in the posts; characters of those lines
    not found): the share is high when the article extractor's main text is the thread's first post, low
    for an article above its comments (1.0 when `text` has no running text: that extractor found nothing to
    weigh). A line counts as found when its middle `_PROBE` characters, spaces ignored, occur in the posts'
    text (a substring search, not a parse)."""
    posts = _NO_SPACE.sub("", thread.text)
    found = total = 0
    for line in text.split("\n"):
        n = weighted_chars(line)
        if n < rules.long_chars:
            continue
        flat = _NO_SPACE.sub("", line)
        middle = max(0, (len(flat) - _PROBE) // 2)
        total += n
        found += n if flat[middle:middle + _PROBE] in posts else 0
    return (found / total if total else 1.0), total - found


def is_main_content(text: str, thread: Thread, rules: ThreadRules = ThreadRules()) -> bool:
    """Whether the posts are the page's main content, judged against the article extractor's `text`."""
    inside, outside = placement(text, thread, rules)
    return inside >= rules.min_main_inside and outside < rules.max_outside_chars


class PageRepeats:
    """One page's running-text votes, with the members and dated-gap share of each group computed once:
    `thread(rules)` for several rules (the evaluation's threshold sweep) costs one analysis."""

    def __init__(self, root, long_chars: int = ThreadRules.long_chars):
        self.root = root
        self.votes, self.total = _votes(root, long_chars) if root is not None else ({}, 0.0)
        self._members: dict[str, list] = {}
        self._dated: dict[str, float] = {}
        self._rendered: dict[str, list[str]] = {}

    def thread(self, rules: ThreadRules = ThreadRules()) -> Thread | None:
        """The page's posts (see the module docstring), or None when its running text is not a list of posts."""
        if not self.total:
            return None
        candidates = []
        for sig, hit in self.votes.items():
            share = sum(hit.values()) / self.total
            if len(hit) >= rules.min_posts and share >= rules.min_long_share:
                candidates.append((_depth(next(iter(hit))), share, sig, hit))
        for depth, share, sig, hit in sorted(candidates, key=lambda c: (c[0], c[1]), reverse=True):
            if sig not in self._members:  # the deepest candidate that passes: bodies, not whole posts
                self._members[sig] = _members(self.root, sig, hit)
            members = self._members[sig]
            if len(members) < rules.min_posts:
                continue
            if sig not in self._dated:
                self._dated[sig] = _dated_gaps(self.root, members)
            if self._dated[sig] >= rules.min_dated_gaps:
                if sig not in self._rendered:
                    self._rendered[sig] = [text for text in map(render, members) if text]
                posts = self._rendered[sig]
                return Thread(posts, sig, share, self._dated[sig]) if len(posts) >= rules.min_posts else None
        return None


def find_thread(root, rules: ThreadRules = ThreadRules()) -> Thread | None:
    """The page's posts (see the module docstring), or None when its running text is not a list of posts."""
    return PageRepeats(root, rules.long_chars).thread(rules)
