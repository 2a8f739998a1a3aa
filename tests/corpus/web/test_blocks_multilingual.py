"""Block rules that hold for any script (corpus/web/blocks.py): sentence ends, a short lead sentence before
the text, blocks of many very short lines; and a CJK page end to end. Exact text on pages written here."""

from __future__ import annotations

import pytest

from corpus.web import extract as extract_mod
from corpus.web.blocks import BlockRules, is_sentence, main_blocks

_BODY = "The council decided yesterday to repair the bridge over the river before the summer season starts. " * 3


@pytest.mark.parametrize("text", ["Welcome.", "Hi everyone! 👋", "He said “yes.”", "第一段结束。", "（见下文。）",
                                  "क्या यह सच है।", "هل هذا صحيح؟", "Είναι αλήθεια\u037e", "Это правда…",
                                  "ይህ እውነት ነው።"])
def test_sentence_ends_of_every_script(text):
    assert is_sentence(text)


@pytest.mark.parametrize("text", ["By Jane Doe", "Explore further »", "Read more", "第一段", "20:15"])
def test_lines_that_are_not_sentences(text):
    assert not is_sentence(text)


def test_a_short_lead_sentence_before_the_text_stays_a_byline_does_not():
    html = (f"<p>By Jane Doe</p>\n\n<p>Hi everyone! 👋</p>\n\n<p>Welcome to issue #130.</p>\n\n<p>{_BODY}</p>\n\n"
            f"<p>{_BODY}</p>")
    assert main_blocks(html)[0] == "\n".join(["Hi everyone! 👋", "Welcome to issue #130.", _BODY.strip(), _BODY.strip()])
    assert main_blocks(html, BlockRules(short_lead=False))[0] == "\n".join([_BODY.strip()] * 2)


def test_a_block_of_many_very_short_lines_is_a_list_not_text():
    # (resiliparse renders a <br> as a line break inside the block)
    times = "\n".join([f"{h}:{m:02d}" for h in range(8, 20) for m in (5, 35)]
                      + ["Partner news", "Weather", "Markets", "Sport", "Jobs", "Contact", "Imprint", "Archive"])
    html = f"<p>{_BODY}</p>\n\n<p>{times}</p>\n\n<p>Write to the editor if you see an error.</p>"
    text, _, blocks = main_blocks(html)
    # the list is long, with no links, but its lines average under 14 characters
    assert blocks[1].chars > 150 and [b.label for b in blocks] == ["good", "bad", "bad"]
    assert text == _BODY.strip()
    assert main_blocks(html, BlockRules(short_line_chars=0))[0].startswith(_BODY.strip() + "\n8:05\n8:35")
    # a <pre> keeps its short lines (code is its form)
    code = "<pre>a = 1\nb = 2\nc = 3\nd = 4\nprint(a)</pre>"
    assert main_blocks(f"<p>{_BODY}</p>\n\n{code}\n\n<p>{_BODY}</p>")[0].count("\n") == 6


def test_a_chinese_article_in_gbk_keeps_its_lead_and_paragraphs_and_drops_menus_and_times():
    paras = ["市议会昨天决定在夏季到来之前修复河上的老桥，工程预计五月开始，八月底结束，期间桥梁对机动车封闭，行人和自行车仍可通行。" * 2,
             "市政部门表示，这座桥建于一九六二年，近年来多次检查发现桥墩出现裂缝，必须尽快加固，否则可能影响通行安全和附近居民的生活。" * 2,
             "附近商户对此表示理解，但希望施工期间能够保证道路畅通，并在周末减少噪音，方便顾客前来购物和用餐，也方便居民出行。" * 2]
    menu = "".join(f"<a href='/c{i}'>{name}</a> " for i, name in enumerate(["首页", "新闻", "体育", "财经", "娱乐"]))
    times = "<br>".join(f"{h}:{m:02d}" for h in range(8, 12) for m in (0, 30))
    page = (f"<html><head><meta charset='gbk'><title>老桥五月开始维修_新闻中心</title></head><body>"
            f"<div class='nav'>{menu}</div><h1>老桥五月开始维修</h1><article><p>本报讯。</p>"
            + "".join(f"<p>{p}</p>" for p in paras)
            + f"</article><div class='latest'>{times}</div><p>版权所有 &copy; 2021 新闻中心</p></body></html>")
    got = extract_mod.extract_page(page.encode("gbk"), None, None)
    assert got.charset == "gb18030 (declared)" and got.extractor == "blocks"
    # the lead sentence (it ends in 。) stays; the heading that repeats the title, the menu, the list of
    # times and the copyright line go
    assert got.text == "\n".join(["本报讯。", *paras])


@pytest.mark.parametrize("raw, text, chars, density", [
    # one line, no link: spaces collapsed, entities decoded, outer space stripped
    ("<p>  Fish &amp; chips\t are   ready </p>", "Fish & chips are ready", 22, 0.0),
    # several lines: each collapsed and stripped, blank ones left out
    ("<p>a  b\n  c </p>", "a b\nc", 5, 0.0),
    # ideographs and kana weigh three characters each, Latin letters one
    ("<p>漢字かなabc</p>", "漢字かなabc", 4 * 3 + 3, 0.0),
    # link text over all text, ideographs weighted the same way
    ('<p>see <a href="/x">漢字</a></p>', "see 漢字", 4 + 6, 6 / 10),
    ('<p><a href="/x">all link</a></p>', "all link", 8, 1.0),
])
def test_block_text_length_and_link_density_by_hand(raw, text, chars, density):
    [block] = main_blocks(raw, BlockRules(skip_class_words=()))[2]
    assert (block.text, block.chars, block.link_density) == (text, chars, pytest.approx(density))
