"""Questions and answers from Q&A-site HTML, with formulas kept as LaTeX.

Q&A pages: the question is found by schema.org microdata (`itemtype=.../Question`) or StackExchange's
`#question` / `.question`; answers by microdata (`itemprop=acceptedAnswer|suggestedAnswer`) *and* by
structure (`[data-answerid]`, `.answer` post containers), since many pages put microdata on the accepted
answer only. The outermost container of each answer counts once. Bodies: `itemprop=text`, `.s-prose`,
`.post-text`; votes: `data-score`, `itemprop=upvoteCount`, `.js-vote-count`.

The accepted answer is the one the page marks accepted: a structural mark (`.accepted-answer`,
`data-accepted`/`data-is-accepted`, `.js-accepted-answer`) wins over microdata, because some pages tag
the top-voted answer `acceptedAnswer`; microdata counts only on pages without structural marks, and at
most one answer is accepted (the first so marked).

Pages without Q&A markup may be forum threads (corpus/math/forums.py): the first post becomes the
question and the replies the answers (`QA.kind == "forum"`), without navigation.
Formulas are rewritten by html_math.latexify before text is taken, so `$...$` survives.
"""

from __future__ import annotations

import re

from .forums import extract_thread
from .html_math import latexify, node_text, parse_html, tidy_formulas
from .thread import QA, Answer

_BODY_XPATH = (".//*[@itemprop='text'] | .//*[contains(concat(' ', normalize-space(@class), ' '), ' s-prose ')]"
               " | .//*[contains(concat(' ', normalize-space(@class), ' '), ' post-text ')]")


def _body(el) -> str:
    found = el.xpath(_BODY_XPATH)
    # the outermost body element of this post, not one of a nested post (comments have none)
    return tidy_formulas(node_text(found[0])) if found else ""


def _score(el) -> int | None:
    for value in (el.get("data-score"),
                  *(v.get("content") or v.text_content() for v in el.xpath(".//*[@itemprop='upvoteCount']")),
                  *(v.get("data-value") or v.text_content() for v in el.xpath(
                      ".//*[contains(concat(' ', normalize-space(@class), ' '), ' js-vote-count ')]"))):
        if value is not None and re.fullmatch(r"\s*-?\d+\s*", str(value)):
            return int(value)
    return None


def _title(root) -> str:
    for xp in ("//*[@id='question-header']//h1", "//*[@itemtype and contains(@itemtype, 'Question')]"
               "//*[@itemprop='name']", "//*[contains(@class, 'threadtitle')]", "//h2[contains(@class, 'topic-title')]",
               "//h1", "//head/title"):
        found = root.xpath(xp)
        if found:
            return " ".join(found[0].text_content().split())
    return ""


_ANSWER_XPATH = ("//*[@itemprop='acceptedAnswer' or @itemprop='suggestedAnswer' or @data-answerid"
                 " or contains(concat(' ', normalize-space(@class), ' '), ' answer ')]")
_STRUCT_ACCEPTED = {"accepted-answer", "js-accepted-answer", "answer--accepted", "is-accepted"}


def _structurally_accepted(el) -> bool:
    if _STRUCT_ACCEPTED & set((el.get("class") or "").split()):
        return True
    return any((el.get(attr) or "").lower() in ("true", "1", "yes") for attr in ("data-accepted", "data-is-accepted"))


def _answer_elements(root, question) -> list:
    """Each answer's outermost container (microdata or structure), in document order, outside the question body."""
    found = root.xpath(_ANSWER_XPATH)
    chosen = set(found)
    out = []
    for el in found:
        if any(a in chosen for a in el.iterancestors()):
            continue  # inside an answer already counted (its microdata half, a nested comment list)
        if el is question or el in question.iterancestors():
            continue
        out.append(el)
    return out


def _accepted_flags(answer_els) -> list[bool]:
    structural = [_structurally_accepted(a) or any(_structurally_accepted(d) for d in a.iterdescendants())
                  for a in answer_els]
    flags = structural if any(structural) else [
        a.get("itemprop") == "acceptedAnswer" or bool(a.xpath(".//*[@itemprop='acceptedAnswer']")) for a in answer_els]
    first = next((i for i, f in enumerate(flags) if f), None)
    return [i == first for i in range(len(flags))]


def extract_qa(markup: str | bytes) -> QA | None:
    """The question and its answers (or a forum thread's posts), or None when the page has neither."""
    root = parse_html(markup)
    latexify(root)
    question = (root.xpath("//*[@itemtype and contains(@itemtype, 'schema.org/Question')]")
                or root.xpath("//*[@id='question']")
                or root.xpath("//*[contains(concat(' ', normalize-space(@class), ' '), ' question ')]"))
    if not question:
        return extract_thread(root, _title(root))
    q = question[0]
    answer_els = _answer_elements(root, q)
    # the question's own body: its first body element that is not inside an answer
    answer_set = set(answer_els)
    q_body = ""
    for el in q.xpath(_BODY_XPATH):
        if not any(a in answer_set for a in el.iterancestors()) and el not in answer_set:
            q_body = tidy_formulas(node_text(el))
            break
    if not q_body:
        return None
    answers = []
    for a, accepted in zip(answer_els, _accepted_flags(answer_els)):
        text = _body(a)
        if text:
            answers.append(Answer(text, _score(a), accepted))
    return QA(_title(root), q_body, answers)
