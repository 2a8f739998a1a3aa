"""Q&A extraction and LaTeX kept from MathJax scripts, KaTeX annotations and MathML (real page)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from corpus.math.html_math import page_text
from evals.data.math_labelled import render_page, render_qa_page
from corpus.math.qa import extract_qa
from corpus.registry import stage_class

QUESTION = "How many vertical asymptotes does the graph of $y=\\frac{2}{x^2+x-6}$ have?"
ANSWER = "Factor: $x^2+x-6=(x-2)(x+3)$, so the graph has $\\boxed{2}$ vertical asymptotes."


def test_microdata_qa_page_gives_question_and_answers_best_first():
    page = render_qa_page("Asymptotes", QUESTION, [("Try plotting it.", 1, False), (ANSWER, 7, True),
                                                    ("Two, by factoring.", 4, False)], qid=1)
    qa = extract_qa(page)
    assert qa.title == "Asymptotes" and qa.question == QUESTION
    assert [(a.score, a.accepted) for a in qa.best_first()] == [(7, True), (4, False), (1, False)]
    assert qa.best_first()[0].text == ANSWER
    assert qa.to_text(max_answers=2) == ("Asymptotes\n\n" + QUESTION + "\n\nAnswer (accepted, score 7):\n" + ANSWER
                                         + "\n\nAnswer (score 4):\nTwo, by factoring.")


def test_stackexchange_classes_without_microdata():
    page = """<html><body><div id="question-header"><h1><a class="question-hyperlink">Sum of squares</a></h1></div>
    <div id="question" class="question"><div class="post-text"><p>Show that $\\sum_{k=1}^n k^2 = \\frac{n(n+1)(2n+1)}{6}$.</p>
    </div></div><div id="answers">
    <div class="answer" data-answerid="11"><span class="js-vote-count">2</span><div class="post-text"><p>By induction.</p></div></div>
    <div class="answer accepted-answer" data-answerid="12"><span class="js-vote-count">15</span>
    <div class="post-text"><p>Telescope $(k+1)^3-k^3$.</p></div></div></div></body></html>"""
    qa = extract_qa(page)
    assert qa.title == "Sum of squares"
    assert qa.question == "Show that $\\sum_{k=1}^n k^2 = \\frac{n(n+1)(2n+1)}{6}$."
    assert [(a.text, a.score, a.accepted) for a in qa.best_first()] == [
        ("Telescope $(k+1)^3-k^3$.", 15, True), ("By induction.", 2, False)]
    assert extract_qa("<html><body><p>Just a blog post.</p></body></html>") is None


def test_mathjax_scripts_and_katex_annotations_become_latex():
    text = "Let $a \\ne 0$. Then\n$$x = \\frac{-b \\pm \\sqrt{b^2-4ac}}{2a}$$"
    mj = page_text(render_page("Quadratic", text, "mathjax2"))
    assert "$a \\ne 0$" in mj and "$$x = \\frac{-b \\pm \\sqrt{b^2-4ac}}{2a}$$" in mj
    assert mj.count("\\ne 0") == 1  # the MathJax preview copy is gone
    kx = page_text(render_page("Quadratic", text, "katex"))
    assert "$a \\ne 0$" in kx and kx.count("\\sqrt{b^2-4ac}") == 1  # KaTeX's HTML copy is gone


def test_mathml_without_tex_goes_through_the_shipped_mmltex_stylesheet():
    page = ("<html><body><p>The roots are <math><mi>x</mi><mo>=</mo><mfrac><mrow><mo>-</mo><mi>b</mi></mrow>"
            "<mrow><mn>2</mn><mi>a</mi></mrow></mfrac></math> and <math><msqrt><mi>y</mi></msqrt></math>.</p>"
            "</body></html>")
    assert page_text(page.encode()) == "The roots are $x=\\frac{-b}{2a}$ and $\\sqrt{y}$."


def test_mathml_goes_through_the_mmltex_stylesheet(shared_data):
    page = (shared_data / "web_extraction/mozilla_readability/test-pages/mathjax/source.html").read_bytes()
    text = page_text(page)
    assert "$a{x}^{2}+bx+c=0$" in text
    assert "\\frac{-b±\\sqrt{{b}^{2}-4ac}}{2a}" in text
    assert "mjx-" not in text


def test_stage_extracts_falls_back_and_drops():
    qa_page = render_qa_page("Asymptotes", QUESTION, [(ANSWER, 3, True), ("Meh.", -2, False)], qid=2)
    unanswered = render_qa_page("Open", QUESTION, [], qid=3)
    blog = render_page("Blog", "Nothing to ask.", "bare")
    table = pa.table({"html": [qa_page, unanswered, blog], "url": ["a", "b", "c"]})
    strict = stage_class("math_qa_extract_v1")({"min_answer_score": 0})(table)
    assert strict.table.column("text").to_pylist() == [
        "Asymptotes\n\n" + QUESTION + "\n\nAnswer (accepted, score 3):\n" + ANSWER]
    assert strict.table.column("qa__n_answers").to_pylist() == [1]
    assert strict.table.column("qa__accepted_score").to_pylist() == [3]
    assert strict.rejects.column("drop_reason").to_pylist() == ["no_answer", "no_qa"]
    loose = stage_class("math_qa_extract_v1")({"fallback": "page_text", "require_answer": False})(table)
    assert loose.stats.rows_out == 3 and loose.table.column("text")[2].as_py() == "Blog\n\nNothing to ask."


@pytest.mark.usefixtures("shared_data")
def test_labelled_set_composition():
    from evals.data.math_labelled import labelled_set

    rows = labelled_set()
    assert len(rows) == 543 and sum(r["label"] for r in rows) == 262
    assert {r["id"] for r in rows if r["origin"] == "readability/math"} == {
        "readability-mathjax", "readability-wikipedia-3"}


@pytest.mark.parametrize("encoding,header", [("utf-8", "text/html; charset=UTF-8"),
                                             ("cp1252", "text/html; charset=windows-1252"),
                                             ("cp1252", "text/html; charset=ISO-8859-1")])
def test_warc_bytes_are_decoded_by_the_http_charset(encoding, header):
    # no <meta charset>: only the HTTP header names the encoding (lxml alone reads UTF-8 as Latin-1: "PoincarÃ©")
    page = "<html><body><p>Poincaré's conjecture: every closed $3$-manifold …</p></body></html>"
    raw = page.replace("…", "...").encode(encoding)
    table = pa.table({"content": pa.array([raw], pa.binary()), "content_type": [header]})
    out = stage_class("math_qa_extract_v1")({"field": "content", "fallback": "page_text"})(table).table
    assert out.column("text").to_pylist() == ["Poincaré's conjecture: every closed $3$-manifold ..."]
    signals = stage_class("math_signals_v1")({"field": "content"})(table).table
    assert signals.column("math__n_tags").to_pylist() == [1]  # `$3$`


def test_control_characters_in_a_page_do_not_break_text_extraction():
    page = "<html><body><p>Let\x0b $x\x01 = 1$\x1f here.</p><pre>a\n  b</pre></body></html>"
    assert page_text(page) == "Let $x = 1$ here.\n\na\nb"
