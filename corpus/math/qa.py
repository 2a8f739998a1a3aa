"""Questions and answers from Q&A-site HTML, with formulas kept as LaTeX.

Two markups are recognised:
- schema.org QAPage microdata (`itemtype=.../Question`, `itemprop=acceptedAnswer|suggestedAnswer`,
  `itemprop=text`, `itemprop=upvoteCount`), which StackExchange, MathOverflow and many forums emit;
- StackExchange's own classes (`#question`, `.answer[data-answerid]`, `.accepted-answer`,
  `data-score`, `.js-vote-count`, `.s-prose` / `.post-text`), for pages without microdata.
Formulas are rewritten by html_math.latexify before text is taken, so `$...$` survives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .html_math import latexify, node_text, parse_html

_BODY_XPATH = (".//*[@itemprop='text'] | .//*[contains(concat(' ', normalize-space(@class), ' '), ' s-prose ')]"
               " | .//*[contains(concat(' ', normalize-space(@class), ' '), ' post-text ')]")


@dataclass
class Answer:
    text: str
    score: int | None
    accepted: bool


@dataclass
class QA:
    title: str
    question: str
    answers: list[Answer] = field(default_factory=list)

    def best_first(self) -> list[Answer]:
        return sorted(self.answers, key=lambda a: (not a.accepted, -(a.score or 0)))

    def to_text(self, *, max_answers: int | None = None) -> str:
        parts = [self.title, self.question] if self.title else [self.question]
        for a in self.best_first()[:max_answers]:
            label = ", ".join(x for x in ("accepted" if a.accepted else "",
                                          f"score {a.score}" if a.score is not None else "") if x)
            parts.append(f"Answer ({label}):\n{a.text}" if label else f"Answer:\n{a.text}")
        return "\n\n".join(p for p in parts if p)


def _has_class(el, name: str) -> bool:
    return name in (el.get("class") or "").split()


def _body(el) -> str:
    found = el.xpath(_BODY_XPATH)
    # the outermost body element of this post, not one of a nested post (comments have none)
    return node_text(found[0]) if found else ""


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
               "//*[@itemprop='name']", "//h1"):
        found = root.xpath(xp)
        if found:
            return " ".join(found[0].text_content().split())
    return ""


def extract_qa(markup: str | bytes) -> QA | None:
    """The question and its answers, or None when the page has no Q&A markup or no question body."""
    root = parse_html(markup)
    latexify(root)
    question = (root.xpath("//*[@itemtype and contains(@itemtype, 'schema.org/Question')]")
                or root.xpath("//*[@id='question']")
                or root.xpath("//*[contains(concat(' ', normalize-space(@class), ' '), ' question ')]"))
    if not question:
        return None
    q = question[0]
    answer_els = (q.xpath(".//*[@itemprop='acceptedAnswer' or @itemprop='suggestedAnswer']")
                  or root.xpath("//*[@itemprop='acceptedAnswer' or @itemprop='suggestedAnswer']")
                  or root.xpath("//*[@data-answerid]"))
    # the question's own body: its first body element that is not inside an answer
    answer_set = set(answer_els)
    q_body = ""
    for el in q.xpath(_BODY_XPATH):
        if not any(a in answer_set for a in el.iterancestors()):
            q_body = node_text(el)
            break
    if not q_body:
        return None
    answers = []
    for a in answer_els:
        text = _body(a)
        if text:
            accepted = a.get("itemprop") == "acceptedAnswer" or _has_class(a, "accepted-answer")
            answers.append(Answer(text, _score(a), accepted))
    return QA(_title(root), q_body, answers)
