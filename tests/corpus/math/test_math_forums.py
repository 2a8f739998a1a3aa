"""Q&A answers by structure, the page's own accepted mark, forum threads as posts (hand-written fixtures
in the markup each software's default template writes)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from corpus.math.qa import extract_qa
from corpus.registry import stage_class

NAV = ('<div class="breadcrumb"><a href="/">Forums</a> &gt; <a href="/f/algebra">Algebra</a></div>'
       '<ul class="nav"><li>Home</li><li>New posts</li><li>Log in</li></ul>')
SIMILAR = '<div class="similar-threads"><h3>Similar threads</h3><ul><li><a>Prove 2+2=4</a></li></ul></div>'
FOOTER = '<footer>Powered by forum software. Terms and rules. Contact us.</footer>'


def _answer(aid, votes, body, *, cls="answer", extra=""):
    return (f'<div id="answer-{aid}" class="{cls}" data-answerid="{aid}" data-score="{votes}" {extra}>'
            f'<div class="js-vote-count" data-value="{votes}">{votes}</div>'
            f'<div class="s-prose js-post-body" {"itemprop=text" if "itemprop" in extra else ""}>'
            f'<p>{body}</p></div></div>')


def test_answers_found_by_structure_when_only_the_accepted_one_has_microdata():
    answers = [_answer(100 + i, 10 - i, f"Answer number {i}: $x_{i} = {i}$.") for i in range(8)]
    answers.insert(3, _answer(200, 4, "The accepted one: $x = 0$.", cls="answer accepted-answer",
                              extra='itemprop="acceptedAnswer" itemscope itemtype="https://schema.org/Answer"'))
    page = ('<html><body><div id="question-header"><h1>Nine answers</h1></div>'
            '<div id="question" class="question" data-questionid="1" itemscope itemtype="https://schema.org/Question">'
            '<div class="s-prose js-post-body" itemprop="text"><p>Solve $x^2 = 0$.</p></div></div>'
            f'<div id="answers">{"".join(answers)}</div></body></html>')
    qa = extract_qa(page)
    assert qa.question == "Solve $x^2 = 0$."
    assert len(qa.answers) == 9
    assert [(a.score, a.accepted) for a in qa.best_first()][:3] == [(4, True), (10, False), (9, False)]
    assert sum(a.accepted for a in qa.answers) == 1


def test_accepted_answer_is_the_one_the_page_marks_not_the_top_voted_microdata():
    # the page's microdata calls the top-voted answer acceptedAnswer; its accepted mark is on another one
    page = ('<html><body><div id="question" class="question" itemscope itemtype="https://schema.org/Question">'
            '<h1 itemprop="name">Limits</h1><div class="s-prose" itemprop="text"><p>Find $\\lim_{x\\to0} x$.</p>'
            '</div></div>'
            + _answer(1, 42, "Top voted: it is $0$.",
                      extra='itemprop="acceptedAnswer" itemscope itemtype="https://schema.org/Answer"')
            + _answer(2, 3, "Accepted by the asker: $0$, by continuity.", cls="answer",
                      extra='data-accepted="true" itemprop="suggestedAnswer" itemscope '
                            'itemtype="https://schema.org/Answer"')
            + "</body></html>")
    qa = extract_qa(page)
    assert [(a.score, a.accepted) for a in qa.answers] == [(42, False), (3, True)]
    assert qa.best_first()[0].text == "Accepted by the asker: $0$, by continuity."
    out = stage_class("math_qa_extract_v1")({})(pa.table({"html": [page]})).table
    assert out.column("qa__accepted_score").to_pylist() == [3] and out.column("qa__best_score").to_pylist() == [42]


POST_1 = "How do I show $$\\sum_{k=1}^n k = \\frac{n(n+1)}{2}$$ for all $n$?"
POST_2 = "By induction: $1 = \\frac{1 \\cdot 2}{2}$."
POST_3 = "Or pair the terms: $k$ with $n+1-k$."

FORUMS = {
    "xenforo2": lambda posts: (
        f'<html><head><title>Sum formula | Math Forum</title></head><body>{NAV}'
        '<div class="p-title"><h1 class="p-title-value">Sum formula</h1></div><div class="block-body">'
        + "".join(f'<article class="message message--post js-post" data-author="u{i}"><div class="message-cell">'
                  f'<h4 class="message-name">u{i}</h4><div class="message-userExtras">Joined Jan 2020</div></div>'
                  f'<div class="message-content"><article class="message-body js-selectToQuote">'
                  f'<div class="bbWrapper">{p}</div></article><aside class="message-signature">'
                  f'<div class="bbWrapper">My signature line.</div></aside></div></article>'
                  for i, p in enumerate(posts)) + f'</div>{SIMILAR}{FOOTER}</body></html>'),
    "xenforo1": lambda posts: (
        f'<html><body>{NAV}<div class="titleBar"><h1>Sum formula</h1></div><ol class="messageList">'
        + "".join(f'<li id="post-{i}" class="message"><div class="messageUserInfo">u{i}</div>'
                  f'<blockquote class="messageText SelectQuoteContainer ugc baseHtml">{p}</blockquote></li>'
                  for i, p in enumerate(posts)) + f'</ol>{SIMILAR}{FOOTER}</body></html>'),
    "vbulletin4": lambda posts: (
        f'<html><body>{NAV}<div id="pagetitle"><h1>Thread: <span class="threadtitle"><a>Sum formula</a></span></h1>'
        '</div><ol id="posts">'
        + "".join(f'<li class="postbitlegacy postcontainer" id="post_{i}"><div class="userinfo">u{i} Posts: 12</div>'
                  f'<div class="postbody"><div class="postrow"><div class="content"><div id="post_message_{i}">'
                  f'<blockquote class="postcontent restore">{p}</blockquote></div></div></div></div></li>'
                  for i, p in enumerate(posts)) + f'</ol>{SIMILAR}{FOOTER}</body></html>'),
    "mybb": lambda posts: (
        f'<html><head><title>Sum formula</title></head><body>{NAV}<table><tr><td class="thead">'
        '<strong>Sum formula</strong></td></tr></table><div id="posts">'
        + "".join(f'<div class="post" id="post_{i}"><div class="post_author">u{i}</div>'
                  f'<div class="post_content"><div class="post_head">Post: #{i + 1}</div>'
                  f'<div class="post_body scaleimages" id="pid_{i}">{p}</div></div></div>'
                  for i, p in enumerate(posts)) + f'</div>{SIMILAR}{FOOTER}</body></html>'),
    "phpbb3": lambda posts: (
        f'<html><body><div class="headerbar"><h1>mathforum.example</h1></div>{NAV}'
        '<h2 class="topic-title"><a>Sum formula</a></h2>'
        + "".join(f'<div id="p{i}" class="post has-profile bg2"><div class="inner"><dl class="postprofile">'
                  f'<dt>u{i}</dt></dl><div class="postbody"><h3>Re: Sum formula</h3><p class="author">by u{i}</p>'
                  f'<div class="content">{p}</div></div></div></div>'
                  for i, p in enumerate(posts)) + f'{SIMILAR}{FOOTER}</body></html>'),
    "discourse": lambda posts: (
        f'<html><head><title>Sum formula - Math Community</title></head><body>{NAV}'
        '<div id="main-outlet"><h1><a href="/t/sum-formula/1">Sum formula</a></h1>'
        + "".join(f'<div id="post_{i + 1}" itemscope itemtype="http://schema.org/DiscussionForumPosting" '
                  f'class="topic-body crawler-post"><div class="crawler-post-meta"><span itemprop="author">u{i}'
                  f'</span></div><div class="post" itemprop="text">{p}</div>'
                  f'<div itemprop="interactionStatistic">3 Likes</div></div>'
                  for i, p in enumerate(posts)) + f'</div>{SIMILAR}{FOOTER}</body></html>'),
}


def _html(text):
    return "<p>" + text.replace("\n", "<br />\n") + "</p>"


@pytest.mark.parametrize("software", sorted(FORUMS))
def test_forum_threads_come_out_as_posts_without_navigation(software):
    page = FORUMS[software]([_html(POST_1), _html(POST_2), _html(POST_3)])
    qa = extract_qa(page)
    assert qa is not None and qa.kind == "forum"
    assert qa.title.endswith("Sum formula") or qa.title.startswith("Sum formula")
    assert [qa.question] + [a.text for a in qa.answers] == [POST_1, POST_2, POST_3]
    text = qa.to_text()
    for noise in ("Similar threads", "Powered by", "Log in", "New posts", "signature", "Posts: 12", "Likes", "u1"):
        assert noise not in text
    assert text.endswith("Reply:\n" + POST_3)


def test_forum_formula_line_breaks_are_normalised_and_quotes_dropped():
    # vBulletin writes a multi-line [tex] formula with <br /> inside the delimiters, and a quote of post 1
    post_1 = "Evaluate<br />\n$$\\int_0^1 x^2 \\, dx<br />\n= ?$$"
    post_2 = ('<div class="bbcode_container"><div class="bbcode_quote"><div class="quote_container">'
              'Originally Posted by u0: Evaluate</div></div></div>It is $\\frac{1}{3}$.')
    page = FORUMS["vbulletin4"]([post_1, post_2])
    qa = extract_qa(page)
    assert qa.question == "Evaluate\n$$\\int_0^1 x^2 \\, dx\n= ?$$"
    assert [a.text for a in qa.answers] == ["It is $\\frac{1}{3}$."]
    escaped = FORUMS["mybb"](["Compute $$a^2 &lt;br /&gt; + b^2$$ please", "Done: $c^2$."])
    assert extract_qa(escaped).question == "Compute $$a^2   + b^2$$ please"


def test_blog_with_comment_microdata_is_not_a_forum_thread():
    page = ('<html><body><article><h1>On primes</h1><p>There are infinitely many primes.</p></article>'
            '<div itemscope itemtype="https://schema.org/Comment"><div itemprop="text">Nice post!</div></div>'
            '</body></html>')
    assert extract_qa(page) is None
