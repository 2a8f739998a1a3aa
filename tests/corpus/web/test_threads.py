"""Forum threads read as their post bodies (corpus/web/threads.py, extract_page's thread reading), on small
pages written here: exact text, and the pages that must not be read as threads."""

from __future__ import annotations

from corpus.web import extract as extract_mod
from corpus.web.threads import ThreadRules, find_thread, is_main_content, parse, placement, render

BODIES = [
    "My router drops the connection every evening since the firmware update, has anyone seen this before?",
    "Same here. Rolling back to the previous firmware fixed it for me, the download is on the support page.",
    "Thanks, that worked. I also had to reset the router to factory settings after the downgrade.",
]


def _post(i: int, user: str, date: str, body: str, *, extra: str = "") -> str:
    # per-post chrome around the body: a user box with join date and post count, buttons, a signature
    return (f"<li class='message' id='post-{1000 + i}'><div class='user-box'><a href='/u/{user}'>{user}</a>"
            f"<span>Joined: 12.03.2015</span><span>Posts: {40 + i}</span></div>"
            f"<div class='message-head'><time datetime='2020-04-0{i + 1}'>{date}</time> #{i + 1}</div>"
            f"<div class='message-body'>{extra}<p>{body}</p></div>"
            f"<div class='user-signature'>Sent from my phone, running the very latest firmware of course</div>"
            f"<div class='actions'><a href='#'>Reply</a> <a href='#'>Quote</a></div></li>")


def _thread_page(posts: list[str], *, before: str = "") -> bytes:
    return ("<html><head><title>Router drops connection - Help forum</title></head><body>"
            "<nav><a href='/'>Forum</a> <a href='/help'>Help</a></nav><h1>Router drops connection</h1>"
            f"{before}<ol class='messages'>{''.join(posts)}</ol>"
            "<footer>Copyright 2020 Example forum. All rights reserved.</footer></body></html>").encode()


def test_a_thread_is_read_as_its_post_bodies_without_user_boxes_signatures_or_buttons():
    quote = f"<blockquote class='quote'>{BODIES[1]}</blockquote>"
    page = _thread_page([_post(0, "anna", "April 1, 2020", BODIES[0]), _post(1, "ben", "2 Apr 2020 09:15", BODIES[1]),
                         _post(2, "anna", "03.04.2020", BODIES[2], extra=quote)])
    got = extract_mod.extract_page(page, "text/html", None)  # no forum URL: the page's structure says it
    assert got.extractor == "posts"
    # every body, in page order, one post per paragraph; the quote of an earlier post stays (it is part of
    # the post as written); user names, join dates, post counts, signatures, Reply/Quote and the title go
    assert got.text == "\n\n".join([BODIES[0], BODIES[1], BODIES[1] + "\n" + BODIES[2]])
    thread = find_thread(parse(page.decode()))
    assert thread.signature == "div.message-body#" and thread.dated_gaps == 1.0 and thread.long_share == 1.0


def test_a_cjk_thread_with_dates_in_cjk_characters():
    bodies = ["我家的路由器每天晚上都会断线，升级固件以后一直这样，请问有人遇到过同样的问题吗？谢谢大家帮忙看看。",
              "我也遇到过。把固件降回上一个版本就好了，下载地址在官方支持页面上，可以试一试。",
              "谢谢，降级以后确实好了。另外降级之后还需要把路由器恢复出厂设置才行。"]
    posts = "".join(f"<div class='post-wrap'><div class='author'>用户{i}</div><div class='when'>发表于 2021年3月{i + 5}日</div>"
                    f"<div class='post-text'>{b}</div></div>" for i, b in enumerate(bodies))
    page = f"<html><body><div class='thread'>{posts}</div></body></html>".encode("gb18030")
    got = extract_mod.extract_page(page, "text/html; charset=gbk", None)
    assert got.extractor == "posts" and got.charset == "gb18030 (declared)"
    assert got.text == "\n\n".join(bodies)


def test_comments_under_an_article_are_not_a_thread():
    article = "<article><p>" + "The council decided yesterday to repair the bridge before the summer. " * 4 + "</p></article>"
    comments = "".join(_post(i, f"reader{i}", f"0{i % 9 + 1}.05.2021", BODIES[i % 3]) for i in range(12))
    page = f"<html><body>{article}<h2>Comments</h2><ol class='comments'>{comments}</ol></body></html>".encode()
    got = extract_mod.extract_page(page, "text/html", "https://example.org/2021/bridge.html")
    assert got.extractor != "posts" and got.text.startswith("The council decided")
    # the comments are a list of posts, but the article extractor's running text is not inside them
    thread = find_thread(parse(page.decode()))
    article_text = "The council decided yesterday to repair the bridge before the summer. " * 4
    assert len(thread.posts) == 12 and placement(article_text, thread) == (0.0, len(article_text))


def test_an_article_worth_of_text_outside_the_posts_keeps_the_article():
    # the article extractor kept an article and the long comment thread under it (a forum URL keeps
    # comments): most of its running text is in the posts, but the article outside them is the main text
    comments = "".join(_post(i % 9, f"reader{i}", f"0{i % 9 + 1}.05.2021", BODIES[i % 3]) for i in range(12))
    thread = find_thread(parse(f"<html><body><ol class='comments'>{comments}</ol></body></html>"))
    line = "The council decided yesterday to repair the bridge before summer, at a cost of 2.5 million."
    posts_text = "\n".join(BODIES * 12)  # 36 lines of 92 to 102 characters, every one inside the posts
    inside_chars = (100 + 102 + 92) * 12
    for article_lines, main in ((19, True), (21, False)):  # 19 x 100 = 1,900 characters outside; 21 x 100 = 2,100
        article = "\n".join([line + f" Part {i:02d}." for i in range(article_lines)])
        assert len(article.split("\n")[0]) == 100
        inside, outside = placement(article + "\n" + posts_text, thread)
        assert outside == 100 * article_lines and inside == inside_chars / (inside_chars + 100 * article_lines)
        assert inside > 0.5 and is_main_content(article + "\n" + posts_text, thread) is main
    # with the outside limit lifted, the share alone decides
    assert is_main_content(article + "\n" + posts_text, thread, ThreadRules(max_outside_chars=10 ** 9))


def test_repeated_blocks_without_dates_between_them_are_not_posts():
    # an article whose paragraphs sit in classed divs: repeated, but nothing dated between them
    paras = "".join(f"<div class='para'><p>{b}</p></div><div class='ad'>Advertisement</div>" for b in BODIES)
    assert find_thread(parse(f"<html><body>{paras}</body></html>")) is None
    # the same with a date between each: now a list of posts
    dated = "".join(f"<div class='para'><p>{b}</p></div><div>12:0{i}</div>" for i, b in enumerate(BODIES))
    assert find_thread(parse(f"<html><body>{dated}</body></html>")).posts == BODIES
    # too few posts
    assert find_thread(parse(f"<html><body>{dated}</body></html>"), ThreadRules(min_posts=4)) is None


def test_render_keeps_lines_and_drops_scripts_buttons_and_signatures():
    root = parse("<html><body><div id='x'>One line<br>two <b>bold</b> words<script>var a=1;</script>"
                 "<button>Like</button><ul><li>item a</li><li>item b</li></ul>"
                 "<div class='sig'>my signature</div></div></body></html>")
    assert render(root.find(".//div")) == "One line\ntwo bold words\nitem a\nitem b"


def test_render_joins_the_source_line_breaks_of_a_paragraph_but_not_of_pre():
    # a paragraph wrapped at 40 columns in the HTML source is one line; <pre> keeps its lines
    root = parse("<html><body><div id='x'><p>The firmware update breaks the\nconnection every evening,\n"
                 "   at about nine.</p><pre>ping 10.0.0.1\nreset --factory</pre></div></body></html>")
    assert render(root.find(".//div")) == ("The firmware update breaks the connection every evening, at about nine.\n"
                                           "ping 10.0.0.1\nreset --factory")


def test_the_thread_reading_can_be_switched_off():
    page = _thread_page([_post(i, "anna", f"0{i + 1}.04.2020", b) for i, b in enumerate(BODIES)])
    got = extract_mod.extract_page(page, "text/html", None, thread_rules=None)
    assert got.extractor != "posts"
