"""web_extract_v1 on real WARC pages and Readability pages: text, title, charsets, drop reasons."""

from __future__ import annotations

import time
import unicodedata

import pyarrow as pa
import pytest

from corpus.registry import stage_class
from corpus.web import extract as extract_mod
from corpus.web.blocks import BlockRules
from corpus.web.charset import decode_html

from .conftest import warc_rows


def _rows(contents, content_types=None, urls=None):
    n = len(contents)
    return pa.table({"id": [f"r{i}" for i in range(n)], "content": pa.array(contents, pa.binary()),
                     "content_type": pa.array(content_types or ["text/html"] * n, pa.string()),
                     "url": pa.array(urls or [f"http://example.com/{i}" for i in range(n)], pa.string())})


def test_extracts_every_bundled_warc_page_with_text_title_and_url():
    table = warc_rows()
    result = stage_class("web_extract_v1")({})(table)
    out = result.table
    assert out.num_rows + result.stats.n_dropped == table.num_rows == 53
    assert "content" not in out.schema.names
    assert {"text", "title", "date", "charset", "url"} <= set(out.schema.names)
    texts = out.column("text").to_pylist()
    assert all(t and t == t.strip() for t in texts)
    assert sum(len(t) > 500 for t in texts) >= 40
    assert sum(t is not None for t in out.column("title").to_pylist()) >= 45
    assert out.column("url").to_pylist() == [u for u, rid in zip(table.column("url").to_pylist(),
                                                                  table.column("id").to_pylist())
                                             if rid in set(out.column("id").to_pylist())]
    counters = result.stats.counters
    assert counters.get("extractor_blocks", 0) >= 35 and counters.get("extractor_trafilatura", 0) >= 1


def test_cheap_checks_drop_with_reasons_before_extraction():
    big = b"<html><body>" + b"<p>x</p>" * 100_000 + b"</body></html>"
    table = _rows([b"", b"%PDF-1.4 binary stream", big, b"<html><body><script>var a=1;</script></body></html>",
                   b"<html><head><title>T</title></head><body><p>" + b"Plain words here. " * 40 + b"</p></body></html>"])
    result = stage_class("web_extract_v1")({"max_html_bytes": 100_000})(table)
    reasons = dict(zip(result.rejects.column("id").to_pylist(), result.rejects.column("drop_reason").to_pylist()))
    assert reasons == {"r0": "empty_payload", "r1": "not_html", "r2": "html_too_large", "r3": "empty_text"}
    assert result.table.column("title").to_pylist() == ["T"]
    assert result.rejects.column("content").to_pylist()[1].startswith(b"%PDF")  # rejects keep the raw row


def test_a_page_over_the_time_limit_is_dropped_not_hanging(monkeypatch):
    def slow(*args, **kwargs):
        time.sleep(5)

    monkeypatch.setattr("corpus.stages.web_extract.extract_page", slow)
    start = time.perf_counter()
    result = stage_class("web_extract_v1")({"timeout_s": 0.3, "extractor": "resiliparse"})(_rows([b"<p>hello</p>"]))
    assert time.perf_counter() - start < 2
    assert result.stats.dropped == {"extract_timeout": 1}


def test_charsets_from_header_meta_and_detection():
    text = "Ça coûte très cher à Zürich, déjà vu."
    assert decode_html(text.encode("latin-1"), "text/html; charset=ISO-8859-1")[0] == text
    page = b'<html><head><meta charset="windows-1251"></head><body>' + "Привет, мир".encode("cp1251")
    assert "Привет, мир" in decode_html(page)[0]
    html, how = decode_html(("<p>" + "Это русский текст о погоде и городе. " * 10).encode("cp1251"))
    assert "русский" in html and how.endswith("(detected)")
    # A header that lies (says utf-8, bytes are latin-1) falls through to detection, never raises.
    html, how = decode_html(("<p>" + text * 5).encode("latin-1"), "text/html; charset=utf-8")
    assert "Zürich" in html and "declared" not in how


def test_title_and_date_from_metadata():
    page = (b'<html><head><title> A title </title><meta property="article:published_time" '
            b'content="2021-03-04T05:06:07Z"></head><body><article><p>' + b"Some long text here. " * 30
            + b"</p></article></body></html>")
    got = extract_mod.extract_page(page, "text/html", "http://x.org/a")
    assert (got.title, got.date, got.charset) == ("A title", "2021-03-04T05:06:07Z", "utf-8 (valid)")
    assert got.text.startswith("Some long text here.")


def test_blocks_drop_navigation_bylines_and_related_links_keep_the_article():
    from corpus.web.blocks import main_blocks

    body = "Der Stadtrat hat gestern beschlossen, die Brücke über den Fluss bis zum Sommer zu sanieren. " * 3
    html = ("<p><a href='/'>Home</a> <a href='/news'>News</a> <a href='/sport'>Sport</a></p>\n\n"
            "<p>By Jane Doe</p>\n\n<h2>Die Brücke</h2>\n\n"
            f"<p>{body}</p>\n\n<p>Kurz notiert.</p>\n\n<p>{body}</p>\n\n"
            "<p>Related: <a href='/a'>Another story about something else entirely</a></p>\n\n"
            "<p>We use cookies.</p>")
    text, good_chars, blocks = main_blocks(html)
    assert [b.label for b in blocks] == ["bad", "bad", "good", "good", "good", "good", "bad", "bad"]
    assert text == "\n".join(["Die Brücke", body.strip(), "Kurz notiert.", body.strip()])
    assert good_chars == 2 * len(body.strip()) + len("Die Brücke") + len("Kurz notiert.")


def test_forum_threads_keep_their_posts_and_text_is_cleaned():
    post = "I had the same problem with my router after the update, resetting it fixed the connection. "
    page = ("<html><head><title>Router thread</title></head><body><article><p>" + post * 6 + "</p></article>"
            "<div class='comments'><div class='comment'><p>" + "Second post: thanks, that worked for me too. " * 6
            + "</p></div></div></body></html>").encode()
    forum = extract_mod.extract_page(page, "text/html", "https://example.org/forum/threads/router.123/")
    blog = extract_mod.extract_page(page, "text/html", "https://example.org/2021/router.html")
    assert "Second post" in forum.text and forum.extractor.endswith("_forum")
    assert "Second post" not in blog.text
    ruby = ("<html><body><article><p>" + "<ruby>漢字<rp>(</rp><rt>かんじ</rt><rp>)</rp></ruby>を読む。" * 80
            + "co­operate Café " * 5 + "</p></article></body></html>").encode()
    text = extract_mod.extract_page(ruby, "text/html", None).text
    assert "漢字を読む。" in text and "かんじ" not in text and "(" not in text
    assert "cooperate Café" in text and "\u00ad" not in text


def test_elements_whose_class_or_id_names_boilerplate_are_left_out_but_never_the_page():
    body = "The council decided yesterday to repair the bridge over the river before the summer. " * 12
    page = ("<html><body class='Has-Sidebar'><main id='main-share-root'><article class='post post-meta'>"
            f"<p>{body}</p><figure><img src='a.jpg'><div class='Photo-Caption'>The old bridge, seen from the "
            "south bank in the early morning light (Photo: Jane Doe)</div></figure>"
            "<div id='newsletterBox'><p>Sign up for our weekly newsletter and never miss a single story "
            "from our newsroom again, it is free.</p></div>"
            f"<p>{body}</p><div class='author-bio'><p>Jane Doe writes about cities, bridges and the people "
            "who keep them standing for our local desk.</p></div></article></main></body></html>").encode()
    got = extract_mod.extract_page(page, "text/html", "https://example.org/2021/bridge.html")
    assert got.extractor == "blocks"
    assert got.text == "\n".join([body.strip(), body.strip()])  # outer containers with a skip word stay
    kept = extract_mod.extract_page(page, "text/html", None, block_rules=BlockRules(skip_class_words=()))
    # resiliparse and the block rules alone keep the author box (a long, link-free paragraph)
    assert kept.text.endswith("for our local desk.")
    # a skip word on the content's own container would take the article with it: the skip is not applied
    own = page.replace(b"<article class='post post-meta'>", b"<article><div class='entry has-related-posts'>")
    own = own.replace(b"</article>", b"</div></article>")
    read = extract_mod.extract_page(own, "text/html", None)
    assert read.extractor == "blocks" and read.text == kept.text  # (without the guard: trafilatura's fallback)


def test_text_is_nfc_without_soft_hyphens_zero_width_or_ruby_on_both_extractor_paths():
    # NFD "é" (e + combining acute), a soft hyphen, a zero-width space and a ruby reading in each page;
    # the long page is handled by the blocks, the short one (< 800 characters) by trafilatura.
    sentence = "Cafe\u0301 co\u00adoperation in To\u200bkyo: <ruby>漢字<rp>(</rp><rt>かんじ</rt><rp>)</rp></ruby>を読む。 "
    for repeats, used in ((40, "blocks"), (4, "trafilatura")):
        page = f"<html><body><article><p>{sentence * repeats}</p></article></body></html>".encode()
        got = extract_mod.extract_page(page, "text/html", None)
        assert got.extractor == used
        assert "Café cooperation in Tokyo: 漢字を読む。" in got.text
        assert unicodedata.is_normalized("NFC", got.text)
        assert not set(got.text) & {"\u00ad", "\u200b", "\u0301"} and "かんじ" not in got.text


def test_shingle_and_snippet_metrics_by_hand():
    from evals.data._extraction_metrics import GoldPage, shingle_pr, snippet_counts, tokens

    assert tokens("Das ist 東京タワー, OK") == ["das", "ist", "東", "京", "タ", "ワ", "ー", "ok"]
    gold = GoldPage("p", b"", "article", ["a b c"], ["menu item"], gold_text="a b c d e f")
    # gold shingles: abcd bcde cdef (3); predicted: abcd bcde cdex (3); shared 2
    assert shingle_pr("a b c d e x", gold) == (2 / 3, 2 / 3)
    assert shingle_pr("", gold) == (0.0, 0.0)
    assert snippet_counts("a  b\nc d e menu item", gold) == (1, 0, 1)
    assert snippet_counts("abc", gold) == (1, 0, 0)  # whitespace is ignored when matching
    snippets_only = GoldPage("q", b"", "other", ["one two three four five"], ["footer"])
    # positives: 2 shingles of 4; the output has one of them and the negative 'footer'
    assert shingle_pr("one two three four x footer", snippets_only) == (1 / 2, 1 / 2)


@pytest.mark.slow
def test_extraction_f1_near_trafilatura_on_gold_pages(readability_dir, shared_data):
    from evals.data._extraction_metrics import load_readability, load_trafilatura_eval, summarize
    from evals.data.extraction import extractors, run_extractor

    fns = extractors()
    for pages in (load_readability(readability_dir, limit=30),
                  load_trafilatura_eval(shared_data / "web_extraction" / "trafilatura_eval", limit=60)):
        ours, peer = (summarize(run_extractor(fns[k], pages)[0], pages)
                      for k in ("ours (web_extract_v1)", "trafilatura default"))
        assert ours["shingle_f1"] >= peer["shingle_f1"] - 0.02 and ours["shingle_f1"] > 0.88


_BODY = "The council decided yesterday to repair the bridge over the river before the summer season starts. " * 3


def test_a_heading_is_a_block_of_its_own_not_part_of_the_text_under_it():
    from corpus.web.blocks import main_blocks

    # resiliparse renders h4-h6 on the line above their text, in one block: the block would be a
    # "heading", kept only when a good block follows, so a page's last section would be lost.
    html = f"<p>{_BODY}</p>\n\n<h5>Funding</h5>\n{_BODY}"
    text, _, blocks = main_blocks(html)
    assert text == "\n".join([_BODY.strip(), "Funding", _BODY.strip()])
    assert [(b.heading, b.label) for b in blocks] == [(False, "good"), (True, "good"), (False, "good")]
    merged, _, _ = main_blocks(html, BlockRules(split_headings=False))
    assert merged == _BODY.strip()


def test_a_pre_is_one_block_with_its_blank_lines_and_indentation():
    from corpus.web.blocks import main_blocks

    code = "def area(r):\n\n    return 3.14159 * r * r\n"
    html = f"<p>{_BODY}</p>\n\n<p>The code:</p>\n<pre>{code}</pre>\n\n<p>{_BODY}</p>"
    text, _, blocks = main_blocks(html)
    assert text == "\n".join([_BODY.strip(), "The code:", code.rstrip(), _BODY.strip()])
    assert len(blocks) == 4
    split, _, _ = main_blocks(html, BlockRules(keep_pre=False))
    assert "    return" not in split and "def area(r):" in split  # split apart, indentation lost


def test_a_heading_that_is_an_in_page_anchor_is_not_link_text():
    from corpus.web.blocks import main_blocks

    html = (f'<h2><a href="#intro">Introduction</a></h2>\n\n<p>{_BODY}</p>\n\n'
            f'<h2><a href="/news/other-story">Another story</a></h2>\n\n<p>{_BODY}</p>')
    text, _, blocks = main_blocks(html)
    assert text == "\n".join(["Introduction", _BODY.strip(), _BODY.strip()])
    assert [b.link_density for b in blocks] == [0.0, 0.0, 1.0, 0.0]
    assert main_blocks(html, BlockRules(anchor_headings=False))[0] == "\n".join([_BODY.strip()] * 2)


def test_the_first_heading_that_repeats_the_page_title_is_left_out():
    from corpus.web.blocks import repeats_title

    page = ("<html><head><title>Bridge repairs start in May | The Daily Town</title></head><body><article>"
            f"<h1>Bridge repairs start in May</h1><p>{_BODY * 3}</p><h2>Funding</h2><p>{_BODY * 3}</p>"
            "</article></body></html>").encode()
    got = extract_mod.extract_page(page, "text/html", None)
    assert got.extractor == "blocks" and got.title == "Bridge repairs start in May | The Daily Town"
    assert got.text == "\n".join([(_BODY * 3).strip(), "Funding", (_BODY * 3).strip()])
    kept = extract_mod.extract_page(page, "text/html", None, block_rules=BlockRules(drop_title=False))
    assert kept.text.startswith("Bridge repairs start in May\n")
    title = "How to Build a Terrarium (with Pictures) | eHow"
    assert repeats_title("How to build a  terrarium", title) and repeats_title("eHow", title)
    assert repeats_title("宇航员在太空中喝酒会怎么样？", "宇航员在太空中喝酒会怎么样？_探索者_光明网")
    # a short heading at the title's start, or one that only begins like it, is not the title
    assert not repeats_title("How to", title) and not repeats_title("How to Build a Terra", title)


def test_short_lines_after_text_stay_a_byline_before_it_and_the_page_end_go():
    from corpus.web.blocks import main_blocks

    html = ("<p><a href='/'>Home</a> <a href='/news'>News</a> <a href='/sport'>Sport</a></p>\n\n"
            f"<p>By Jane Doe</p>\n\n<p>{_BODY}</p>\n\n<p>Step 2</p>\n\n<p>Insert the plant into the hole.</p>\n\n"
            "<p>Share: <a href='/s'>Facebook</a> <a href='/t'>Twitter</a> <a href='/m'>Mail</a></p>\n\n"
            "<p>We use cookies.</p>")
    text, _, blocks = main_blocks(html)
    # the sentence stays; "Step 2" (not a sentence), the byline before the text and the last line go
    assert text == "\n".join([_BODY.strip(), "Insert the plant into the hole."])
    assert main_blocks(html, BlockRules(short_sentence=False))[0] == "\n".join(
        [_BODY.strip(), "Step 2", "Insert the plant into the hole."])
    assert main_blocks(html, BlockRules(short_after_good=False))[0] == _BODY.strip()


def test_a_heading_over_a_subheading_stays_with_the_subheadings_text():
    from corpus.web.blocks import main_blocks

    html = f"<h2>Part Two</h2>\n\n<h3>The Holy World</h3>\n\n<p>{_BODY}</p>\n\n<h2>Comments</h2>\n\n<h3>Sort by</h3>"
    assert main_blocks(html)[0] == "\n".join(["Part Two", "The Holy World", _BODY.strip()])
    assert main_blocks(html, BlockRules(subheadings=False))[0] == "\n".join(["The Holy World", _BODY.strip()])
    # a heading over links and then a long teaser is a related-stories box: its first block is not good
    related = (f"<p>{_BODY}</p>\n\n<h3>More on this</h3>\n\n<p><a href='/x'>Bridge closed for the winter again</a></p>"
               f"\n\n<p>{_BODY}</p>")
    assert main_blocks(related)[0] == "\n".join([_BODY.strip()] * 2)
    assert main_blocks(related, BlockRules(heading_next_good=False))[0] == "\n".join(
        [_BODY.strip(), "More on this", _BODY.strip()])


def test_a_link_line_between_two_paragraphs_stays_a_link_list_after_them_goes():
    from corpus.web.blocks import main_blocks

    html = (f"<p>{_BODY}</p>\n\n<p>Read also: <a href='/a'>Why the old bridge was closed in 2019</a></p>\n\n"
            f"<p>{_BODY}</p>\n\n<p><a href='/b'>Another story about something else entirely</a></p>")
    assert main_blocks(html)[0] == "\n".join([_BODY.strip(), "Read also: Why the old bridge was closed in 2019",
                                              _BODY.strip()])
    assert main_blocks(html, BlockRules(inline_links=False))[0] == "\n".join([_BODY.strip()] * 2)


def test_fill_gaps_adds_the_second_opinions_missing_lines_inside_our_text_only():
    ours = "First paragraph of the story, long enough.\nThird paragraph closes the story here."
    other = ("Home News Sport\nFirst paragraph of the story, long enough.\nSecond paragraph we lost, with facts."
             "\nThird paragraph closes the story here.\nMore stories you may like")
    assert extract_mod.fill_gaps(ours, other) == ("\n".join([
        "First paragraph of the story, long enough.", "Second paragraph we lost, with facts.",
        "Third paragraph closes the story here."]), 1)
    # our blank lines and indentation (a <pre>) stay as they are
    code = ("First paragraph of the story, long enough.\n\n    area = 3.14 * r * r\n"
            "Third paragraph closes the story here.")
    assert extract_mod.fill_gaps(code, other)[0] == code.replace("\n\n", "\nSecond paragraph we lost, with facts.\n\n")
    # a line of the other text made mostly of ours (a table row holding the article) is not added again
    row = "| First paragraph of the story, long enough. | Third paragraph closes the story here. |"
    assert extract_mod.fill_gaps(ours, "First paragraph of the story, long enough.\n" + row) == (ours, 0)


def test_sections_that_lost_their_text_bring_in_a_second_opinion(monkeypatch):
    links = "".join(f"<li><a href='/bug/{i}'>Bug {i} fixed in the tab strip code</a></li>" for i in range(8))
    body = (_BODY * 2).strip()
    page = ("<html><head><title>Weekly notes</title></head><body><article>"
            f"<p>{body}</p><h2>Add-ons</h2><ul>{links}</ul><h2>Performance</h2><ul>{links}</ul>"
            f"<h2>Printing</h2><p>{body}</p></article></body></html>").encode()
    calls = []

    def second(html, **kwargs):
        calls.append(kwargs["fast"])
        return "\n".join([body, "Add-ons", "Gijs fixed the tab strip flicker.", "Printing", body])

    monkeypatch.setattr(extract_mod, "trafilatura_text", second)
    got = extract_mod.extract_page(page, "text/html", None)
    assert calls == [True] and got.extractor == "blocks+trafilatura"
    # two headings inside the text lost their (link-list) text: trafilatura's lines we lack are added
    assert got.text == "\n".join([body, "Add-ons", "Gijs fixed the tab strip flicker.", "Printing", body])
    off = extract_mod.extract_page(page, "text/html", None, second_opinion_headings=0)
    assert calls == [True] and off.extractor == "blocks"
    assert off.text == "\n".join([body, "Printing", body])
    big = extract_mod.extract_page(page, "text/html", None, second_opinion_max_chars=len(page) - 1)
    assert calls == [True] and big.text == off.text  # a page over the size cap gets no second opinion


def _date_by_queries(tree):
    """The reference: each date selector queried on its own, in order; the first match with a non-blank value."""
    for selector, attr in extract_mod._DATE_SELECTORS:
        node = tree.document.query_selector(selector)
        if node is not None and (node.getattr(attr) or "").strip():
            return node.getattr(attr).strip()[:64]
    return None


@pytest.mark.parametrize("head, body, expected", [
    # priority beats document order
    ('<meta itemprop="datePublished" content="I"><meta property="article:published_time" content="A">', "", "A"),
    # a selector whose first match is blank gives way to the next selector, not to its own second match
    ('<meta name="pubdate" content="P"><meta name="date" content="  "><meta name="date" content="D2">', "", "P"),
    # attribute values compare with their case; <time> comes last
    ('<meta name="DATE" content="X">', '<time>no attribute</time><time datetime=" T ">t</time>', "T"),
    ('<meta name="date" content="' + "9" * 80 + '">', "", "9" * 64),
    ('<meta name="description" content="2020-01-01">', "<p>no date</p>", None),
])
def test_date_is_the_first_selector_with_a_value(head, body, expected):
    from resiliparse.parse.html import HTMLTree

    tree = HTMLTree.parse(f"<html><head>{head}</head><body>{body}</body></html>")
    assert extract_mod._date(tree) == expected == _date_by_queries(tree)


def test_date_equals_one_query_per_selector_on_every_bundled_and_readability_page(readability_dir):
    from resiliparse.parse.html import HTMLTree

    table = warc_rows()
    pages = [decode_html(c, t)[0] for c, t in zip(table.column("content").to_pylist(),
                                                   table.column("content_type").to_pylist())]
    pages += [decode_html(p.read_bytes(), None)[0] for p in sorted(readability_dir.glob("*/source.html"))]
    dated = 0
    for html in pages:
        tree = HTMLTree.parse(html)
        dated += _date_by_queries(tree) is not None
        assert extract_mod._date(tree) == _date_by_queries(tree)
    assert len(pages) > 150 and dated >= 20  # the pages exercise the date path, not only "no date"


def test_byte_identical_payloads_are_extracted_once_each_row_as_if_alone(monkeypatch):
    import uuid

    calls = []
    real = extract_mod.extract_page

    def counting(content, *args, **kwargs):
        calls.append(content)
        return real(content, *args, **kwargs)

    monkeypatch.setattr("corpus.stages.web_extract.extract_page", counting)
    token = uuid.uuid4().hex  # bytes no earlier test extracted in this process
    page = (f"<html><head><title>{token}</title></head><body><article><p>" + "A sentence of the story. " * 40
            + "</p></article><div class='comments'><p>" + "A reader's comment on it. " * 12
            + "</p></div></body></html>").encode()
    other = page.replace(b"story", b"tale")
    urls = ["http://a.org/story", "https://a.org/story?utm=1", "http://a.org/forum/thread/1", "http://b.org/x"]
    rows = _rows([page, page, page, other], urls=urls)
    result = stage_class("web_extract_v1")({})(rows)
    assert len(calls) == 3  # the second copy under a non-forum URL was not extracted again
    expected = [real(c, "text/html", u) for c, u in zip([page, page, page, other], urls)]
    assert result.table.column("text").to_pylist() == [p.text for p in expected]
    assert result.table.column("title").to_pylist() == [token] * 4
    assert result.stats.counters["extractor_blocks"] + result.stats.counters.get("extractor_trafilatura", 0) >= 3


_DE = ("Der Gemeinderat hat am Dienstag beschlossen, die alte Brücke über den Fluss im nächsten Frühjahr zu "
       "erneuern. Die Arbeiten sollen etwa sechs Monate dauern.")
_EN = ("The town council decided on Tuesday to rebuild the old bridge over the river next spring, and the "
       "work should take about six months.")


def _short_page(text: str) -> bytes:
    """Under `fallback_below_chars` of text: the hybrid extractor would hand it to trafilatura."""
    return f"<html><head><title>Nachrichten</title></head><body><article><p>{text}</p></article></body></html>".encode()


def test_a_page_in_another_language_keeps_its_text_and_skips_trafilatura(monkeypatch):
    calls, asked = [], []

    def fallback(html, **kwargs):
        calls.append(html)
        return "trafilatura's text"

    def other_language(text):
        asked.append(text)
        return text.startswith("Der ")

    monkeypatch.setattr(extract_mod, "trafilatura_text", fallback)
    got = extract_mod.extract_page(_short_page(_DE), "text/html", None, other_language=other_language)
    assert got.extractor == "blocks_other_language" and got.text == _DE and calls == []
    assert asked == [_DE]  # asked once, with the cleaned resiliparse text
    # without the check (the default), the same page goes to trafilatura as before
    got = extract_mod.extract_page(_short_page(_DE), "text/html", None)
    assert got.extractor == "trafilatura" and got.text == "trafilatura's text" and len(calls) == 1
    # a long article that needs neither trafilatura nor the thread analysis is not asked about
    long_de = _short_page(" ".join([_DE] * 12))
    got = extract_mod.extract_page(long_de, "text/html", None, other_language=other_language)
    assert got.extractor == "blocks" and got.text == " ".join([_DE] * 12) and asked == [_DE] and len(calls) == 1


def test_stage_languages_skip_trafilatura_only_for_pages_confidently_in_another_language(monkeypatch):
    calls = []
    real = extract_mod.trafilatura_text

    def counting(html, **kwargs):
        calls.append(html)
        return real(html, **kwargs)

    monkeypatch.setattr(extract_mod, "trafilatura_text", counting)
    rows = _rows([_short_page(_DE + " " + _DE), _short_page(_EN + " " + _EN)])
    result = stage_class("web_extract_v1")({"languages": ["en"]})(rows)
    assert result.table.column("text").to_pylist() == [_DE + " " + _DE, _EN + " " + _EN]
    assert result.stats.counters["extractor_blocks_other_language"] == 1
    assert len(calls) == 1 and _EN.encode() in calls[0].encode()  # only the English page reached trafilatura
    # with German wanted, the German page is the one read by trafilatura
    stage_class("web_extract_v1")({"languages": ["de"]})(_rows([_short_page(_DE + " " + _DE + " ")]))
    assert len(calls) == 2 and "Gemeinderat" in calls[1]


def test_stage_languages_must_name_one_and_the_score_be_a_probability():
    with pytest.raises(ValueError, match="languages must list at least one code"):
        stage_class("web_extract_v1")({"languages": []})
    with pytest.raises(ValueError, match="other_language_min_score"):
        stage_class("web_extract_v1")({"languages": ["en"], "other_language_min_score": 1.5})
