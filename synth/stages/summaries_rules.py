"""Checkable rules for a summary, each with the reason it names when broken.

- length: `too_short` (< min_words), `too_long` (> max_words)
- format: `has_list` (bullets / numbered lines), `has_markdown` (#, **), `multi_paragraph`,
  `preamble` (starts with "Sure", "Here is", "Summary:" - the summary should be the summary)
- point of view: `first_person` (I, me, my, we, our: the summary speaks about the payload, it is
  not the sender), `addresses_reader` (you, your: it is not a reply either)
- voice: `passive_voice` (more than `max_passive` be + past-participle clauses; summaries state who
  did what)
- `copied_span`: a run of >= `max_copied_words` words copied verbatim from the payload
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

from manifests.config import require
from corpus.registry import register
from corpus.stage import Filter

_PREAMBLE = re.compile(r"^\s*(sure\b|certainly\b|here(?:'s| is| are)\b|summary\s*:|in summary\b|this (?:email|message|text))", re.I)
_LIST = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+", re.M)
_MARKDOWN = re.compile(r"(^\s*#+\s)|\*\*|__", re.M)
_FIRST = re.compile(r"\b(i|me|my|mine|we|us|our|ours)\b", re.I)
_SECOND = re.compile(r"\b(you|your|yours)\b", re.I)
_PASSIVE = re.compile(r"\b(?:is|are|was|were|be|been|being)\s+(?:\w+ly\s+)?(?:\w+ed|made|done|given|taken|seen|"
                      r"known|held|built|sent|told|found|shown|written|paid|sold|won|led)\b", re.I)


@dataclass(frozen=True, kw_only=True)
class SummaryRulesConfig:
    field: str = "summary"
    payload_field: str = "payload"
    min_words: int = 5
    max_words: int = 60
    max_passive: int = 1
    max_copied_words: int = 15

    def __post_init__(self):
        require(0 < self.min_words < self.max_words, f"need 0 < min_words < max_words; got {self.min_words}, {self.max_words}")


def _hit(rule: str, m: re.Match) -> dict:
    return {"rule": rule, "match": m.group(0).strip()[:60], "span": [m.start(), m.end()]}


def rule_check(summary: str, payload: str, c: SummaryRulesConfig) -> tuple[str | None, dict | None]:
    """(reason, evidence) for the first broken rule: a length rule gives the word count and its limit,
    a pattern rule the matched text and its character span in the stripped summary, `passive_voice` the
    count, the limit and the clauses, `copied_span` the copied words."""
    s = (summary or "").strip()
    n = len(s.split())
    if n < c.min_words:
        return "too_short", {"rule": "min_words", "value": n, "min": c.min_words}
    if n > c.max_words:
        return "too_long", {"rule": "max_words", "value": n, "max": c.max_words}
    for reason, pattern in (("preamble", _PREAMBLE), ("has_list", _LIST), ("has_markdown", _MARKDOWN)):
        m = pattern.search(s)
        if m:
            return reason, _hit(reason, m)
    if "\n\n" in s:
        at = s.index("\n\n")
        return "multi_paragraph", {"rule": "multi_paragraph", "span": [at, at + 2]}
    for reason, pattern in (("first_person", _FIRST), ("addresses_reader", _SECOND)):
        m = pattern.search(s)
        if m:
            return reason, _hit(reason, m)
    passive = _PASSIVE.findall(s)
    if len(passive) > c.max_passive:
        return "passive_voice", {"rule": "max_passive", "value": len(passive), "max": c.max_passive,
                                 "matches": passive[:5]}
    words, pw = s.lower().split(), " ".join((payload or "").lower().split())
    k = c.max_copied_words
    for i in range(0, max(len(words) - k + 1, 0)):
        if " ".join(words[i:i + k]) in pw:
            return "copied_span", {"rule": "max_copied_words", "words": k, "at_word": i,
                                   "copied": " ".join(words[i:i + k])[:160]}
    return None, None


def rule_reason(summary: str, payload: str, c: SummaryRulesConfig) -> str | None:
    return rule_check(summary, payload, c)[0]


@register
class SummaryRules(Filter):
    name = "summary_rules_v1"
    Config = SummaryRulesConfig

    def reasons(self, table: pa.Table) -> tuple[pa.Array, list]:
        c = self.config
        s, p = table.column(c.field).to_pylist(), table.column(c.payload_field).to_pylist()
        checked = [rule_check(a, b, c) for a, b in zip(s, p)]
        return pa.array([r for r, _ in checked], pa.string()), [e for _, e in checked]
