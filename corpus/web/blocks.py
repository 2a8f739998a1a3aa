"""Boilerplate removal after extraction: resiliparse's block output -> the blocks that are main text.

resiliparse renders its main-content pick as minimal HTML (paragraphs, headings, list items, links).
Each block (the text between blank lines; a heading is always a block of its own, a <pre> always one
block) gets cheap, language-independent features: its length in
characters, its link density (characters inside <a> / all characters; a heading's in-page anchor,
`<h2><a href="#part">`, is not a link away) and whether it is a heading.
Blocks are then classified in the manner of jusText (Pomikálek 2011), without its stop-word lists so
that it holds for any language:

- `bad`: link density over `max_link_density` (navigation, related links, "next article"), a
  copyright line (©), or a very short block with a link;
- `good`: at least `good_chars` characters and link density under `good_link_density`;
- `short`: under `short_chars` characters (bylines, dates, captions, buttons, cookie lines);
- `near`: everything between.

Context then decides the uncertain ones, with the page's start and end counting as `bad`: a link
block (not a heading, no ©) right between two good blocks stays (`inline_links`: an article's own
"Read also" lines; Readability's gold keeps them, trafilatura's pages count some as boilerplate); a `near`
block stays when one of its nearest certain neighbours is good (with `strict_near`; else unless both
are bad); a `short` block stays between two good ones, or, when it is a sentence without links, after a
good one when a block (not the page's end) follows (`short_after_good`, `short_sentence`: the steps of a
how-to, a one-line paragraph in a story; a byline before the story, between navigation and text, and
"Explore further" after it still go); a heading stays when its first block that is not a heading is
good, with no heading of its rank or higher between (`heading_next_good`, `subheadings`: "Part Two"
<h2> followed by an <h3> and its text stays; "More on this" over a list of links and then a teaser
goes). The result is the kept blocks' text (less the first heading that repeats the page's <title>:
the title is metadata, and neither Readability's gold nor trafilatura puts it in the text) and its
length (ideographs weighted x3), which tells the caller how much main text the page had, and so
whether a second extractor should look at the page.

Before any of that, elements whose class or id names a boilerplate role (caption, share, related,
newsletter, byline, footer, tags ...; `BlockRules.skip_class_words`) are left out of resiliparse's
rendering: what a page's own markup calls boilerplate, in words the web's templates use whatever the
page's language (Readability and trafilatura use the same kind of signal). Where that would remove
most of the main text (the word sits on the content's own container), the page is read without it. Measured on both development
sets, halves tuned and checked apart: it lowers boilerplate kept on trafilatura's pages by about a third
and costs a little recall on Readability's (captions and author boxes are in its gold).
"""

from __future__ import annotations

import html as html_lib
import re
import unicodedata
from dataclasses import dataclass

from .punctuation import TERMINAL_PUNCTUATION

_BLOCK_SPLIT = re.compile(r"\n\s*\n")
_TAG = re.compile(r"<[^>]*>")
_LINK = re.compile(r"<a\b([^>]*)>(.*?)</a>", re.S)
_IN_PAGE_HREF = re.compile(r"""\bhref\s*=\s*["']?#""")
_HEADING = re.compile(r"^\s*<h([1-6])[\s>]")
_HEADING_ELEMENT = re.compile(r"<h([1-6])\b[^>]*>.*?</h\1\s*>", re.S)
_PRE = re.compile(r"<pre\b[^>]*>.*?</pre\s*>", re.S)
_PRE_MARK = re.compile(r"\x00(\d+)\x00")
# Sentence ends of every script (datatrove's terminal punctuation: . ! ? 。 । ۔ ؟ ። ...), the Greek question
# mark and the ellipsis; closing quotes, brackets and emoji after them do not hide them.
_SENTENCE_ENDS = TERMINAL_PUNCTUATION | {"\u037e", "…"}
_CLOSERS = "\"'”’»›)]）」』】〕\u3011 \t"
_TITLE_SEPARATOR = re.compile(r"\s+[|\-–—:·»/]\s+")
_SPACES = re.compile(r"[ \t\r\f\v]+")
# Ideographs and kana carry about a word each: they count as three characters of Latin text.
_WIDE = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


# Substrings of class/id values that name a boilerplate role (matched case-insensitively).
BOILERPLATE_CLASS_WORDS = ("caption", "newsletter", "related", "share", "social", "sidebar", "breadcrumb",
                           "subscribe", "promo", "widget", "rating", "byline", "author", "footer", "tags", "meta")


@dataclass(frozen=True, kw_only=True)
class BlockRules:
    max_link_density: float = 0.65
    good_link_density: float = 0.25
    good_chars: int = 150
    short_chars: int = 50
    copyright_bad: bool = True  # a block with a copyright sign is boilerplate (a script-independent cue)
    strict_near: bool = True  # a `near` block needs a good neighbour (else: just not two bad ones)
    skip_class_words: tuple[str, ...] = BOILERPLATE_CLASS_WORDS  # elements left out before blocks are made
    min_skip_kept: float = 0.5  # the skip must keep this share of the page's main text, else it is not applied
    split_headings: bool = True  # a heading is a block of its own, apart from the text under it
    keep_pre: bool = True  # a <pre> is one block, blank lines and indentation included
    anchor_headings: bool = True  # a heading's in-page anchor link (<h2><a href="#x">) is not link text
    drop_title: bool = True  # the first heading that repeats the page's title is left out (it is the title)
    short_after_good: bool = True  # a link-free short block right after good text stays unless the page ends
    short_sentence: bool = True  # ... when it is a sentence (ends in . ! ? 。 ...): not "Explore further"
    short_lead: bool = True  # a link-free short sentence right before good text stays (a lead, a greeting)
    # a block of at least 4 lines averaging under this many characters (ideographs x3) is a list of short
    # items (menus, times, calendars, partner links), judged as a short block however long it is; 0 = off
    short_line_chars: int = 14
    inline_links: bool = True  # a link block right between two good blocks stays ("Read also: <a>...</a>" in a story)
    subheadings: bool = True  # a heading followed by a lower-rank heading (h2 -> h3) waits for that one's text
    heading_next_good: bool = True  # a heading stays only when the first non-heading block under it is good

    def skip_selectors(self) -> list[str]:
        """CSS selectors for resiliparse's `skip_elements`: class or id containing a skip word, never
        the page's outer containers (a theme's `<body class="has-sidebar">` must not skip the page)."""
        return [f'[{attr}*="{word}" i]:not(html):not(body):not(main):not(article)'
                for word in self.skip_class_words for attr in ("class", "id")]


@dataclass
class Block:
    text: str
    chars: int
    link_density: float
    heading: bool
    label: str = ""
    level: int = 0  # 1-6 for <h1>-<h6>
    pre: bool = False  # a <pre> (code, poems): its short lines are its form


def parse_blocks(minimal_html: str, rules: BlockRules = BlockRules(), *, lines: bool = False) -> list[Block]:
    """Blocks (or, with `lines`, each line of a block: a <br> or a line of bare text) with features.

    A block is the text between blank lines of resiliparse's rendering, except that (per `rules`) a
    heading is always a block of its own (resiliparse puts h4-h6 on the line above their text), and a
    <pre> is always one block (its blank lines do not split it)."""
    pres: list[str] = []
    if rules.keep_pre and "<pre" in minimal_html:
        def stash(m: re.Match) -> str:
            pres.append(m.group(0))
            return f"\n\n\x00{len(pres) - 1}\x00\n\n"

        minimal_html = _PRE.sub(stash, minimal_html)
    if rules.split_headings:
        minimal_html = _HEADING_ELEMENT.sub(lambda m: f"\n\n{m.group(0)}\n\n", minimal_html)
    blocks = []
    for raw_block in _BLOCK_SPLIT.split(minimal_html):
        mark = _PRE_MARK.fullmatch(raw_block.strip())
        if mark:
            raw = pres[int(mark.group(1))]
            text = _clean_pre(raw)
            if text:
                blocks.append(Block(text, weighted_chars(text), _link_density(raw, text, False, rules), False,
                                    pre=True))
            continue
        head = _HEADING.match(raw_block)
        heading, level = head is not None, int(head.group(1)) if head else 0
        for raw in (raw_block.split("\n") if lines else (raw_block,)):
            text = _clean(raw)
            if not text:
                continue
            blocks.append(Block(text, weighted_chars(text), _link_density(raw, text, heading, rules), heading,
                                level=level))
    return blocks


def _link_density(raw: str, text: str, heading: bool, rules: BlockRules) -> float:
    if "<a" not in raw:  # no link (most blocks): skip the regex scan
        return 0.0
    link_chars = sum(weighted_chars(_clean(inner)) for attrs, inner in _LINK.findall(raw)
                     if not (heading and rules.anchor_headings and _IN_PAGE_HREF.search(attrs)))
    return min(1.0, link_chars / weighted_chars(text))


def weighted_chars(text: str) -> int:
    """Length in characters, ideographs and kana x3 (about a word each, as three Latin characters are)."""
    if text.isascii():  # no ideograph or kana to count (most text): skip the regex scan
        return len(text)
    return len(text) + 2 * len(_WIDE.findall(text))


def _clean_pre(fragment: str) -> str:
    """A <pre>'s text: its lines as they are (indentation kept), trailing spaces and outer blank lines out."""
    text = html_lib.unescape(_TAG.sub("", fragment))
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")


def _clean(fragment: str) -> str:
    text = html_lib.unescape(_TAG.sub("", fragment) if "<" in fragment else fragment)
    if "\n" not in text:  # one line (most blocks): the same steps without the per-line loop
        return _SPACES.sub(" ", text).strip()
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def is_sentence(text: str) -> bool:
    """Whether `text` ends like a sentence in any script (see _SENTENCE_ENDS)."""
    end = len(text)
    while end and (text[end - 1] in _CLOSERS or unicodedata.category(text[end - 1]) in ("So", "Sk", "Mn", "Cf")):
        end -= 1
    return end > 0 and text[end - 1] in _SENTENCE_ENDS


def _short_lines(b: Block, rules: BlockRules) -> bool:
    if not rules.short_line_chars or b.pre or b.text.count("\n") < 3:
        return False
    return b.chars < rules.short_line_chars * (b.text.count("\n") + 1)


def classify(blocks: list[Block], rules: BlockRules) -> None:
    for b in blocks:
        if b.link_density > rules.max_link_density or (rules.copyright_bad and "©" in b.text):
            b.label = "bad"
        elif b.heading:
            b.label = "heading"
        elif b.chars >= rules.good_chars and b.link_density < rules.good_link_density and not _short_lines(b, rules):
            b.label = "good"
        elif b.chars < rules.short_chars or _short_lines(b, rules):
            b.label = "bad" if b.link_density > 0.0 and b.chars < 20 else "short"
        else:
            b.label = "near"
    final = [b.label for b in blocks]
    for i, b in enumerate(blocks):
        if (rules.inline_links and b.label == "bad" and not b.heading and "©" not in b.text
                and 0 < i < len(blocks) - 1 and blocks[i - 1].label == blocks[i + 1].label == "good"):
            final[i] = "good"
        if b.label not in ("near", "short"):
            continue
        prev, prev_real = _neighbour(blocks, i, -1)
        nxt, next_real = _neighbour(blocks, i, +1)
        if b.label == "near":  # the page's edges do not count against it
            if rules.strict_near:
                final[i] = "good" if "good" in (prev, nxt) else "bad"
            else:
                final[i] = "bad" if prev == nxt == "bad" and prev_real and next_real else "good"
        elif (rules.short_after_good and b.link_density == 0.0
              and (not rules.short_sentence or is_sentence(b.text))):
            final[i] = "good" if (prev == "good" and next_real) or (
                rules.short_lead and nxt == "good" and is_sentence(b.text)) else "bad"
        else:
            final[i] = "good" if prev == nxt == "good" else "bad"
    for i, b in enumerate(blocks):
        if b.label == "heading":
            final[i] = "bad"
            for j in range(i + 1, len(blocks)):
                if blocks[j].label == "heading" and (not rules.subheadings or blocks[j].level <= b.level):
                    break
                if final[j] == "good":
                    final[i] = "good"
                    break
                if rules.heading_next_good and not blocks[j].heading:
                    break
    for b, label in zip(blocks, final):
        b.label = label


def _neighbour(blocks: list[Block], i: int, step: int) -> tuple[str, bool]:
    """The nearest certain label in direction `step`, and whether it is a block (not the page edge)."""
    j = i + step
    while 0 <= j < len(blocks):
        if blocks[j].label in ("good", "bad"):
            return blocks[j].label, True
        j += step
    return "bad", False


def _squash_title(text: str) -> str:
    return " ".join(text.casefold().split())


def repeats_title(heading: str, title: str) -> bool:
    """Whether a heading is the page's title: the same words (case and spacing aside) as the whole
    <title>, as one part of it between separators ("Site - Headline"), or as its start up to a
    separator ("Headline (with Pictures) | Site", "标题_频道_网站"; a heading of >= 15 characters)."""
    h, t = _squash_title(heading), _squash_title(title)
    if not h:
        return False
    if h == t or h in (_squash_title(p) for p in _TITLE_SEPARATOR.split(title)):
        return True
    rest = t[len(h):].lstrip()
    return weighted_chars(h) >= 15 and t.startswith(h) and bool(rest) and not rest[0].isalnum()


def drop_title_heading(blocks: list[Block], title: str | None) -> None:
    """Label the first heading that repeats the page's title `bad` (the title is metadata, not main text)."""
    if not title:
        return
    for b in blocks:
        if b.heading and repeats_title(b.text, title):
            b.label = "bad"
            return


def main_blocks(minimal_html: str, rules: BlockRules = BlockRules(), *, title: str | None = None,
                lines: bool = False) -> tuple[str, int, list[Block]]:
    """(kept text, its weighted length in characters, all blocks with their labels); with `title` (the
    page's <title>) and `rules.drop_title`, the heading that repeats it is left out."""
    blocks = parse_blocks(minimal_html, rules, lines=lines)
    classify(blocks, rules)
    if rules.drop_title:
        drop_title_heading(blocks, title)
    kept = [b.text for b in blocks if b.label == "good"]
    good_total = sum(b.chars for b in blocks if b.label == "good")
    return "\n".join(kept), good_total, blocks
