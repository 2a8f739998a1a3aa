"""Long-context Q&A: one answer span, distractors up to the target length, checks."""

from __future__ import annotations

import random

import pytest

from synth.stages.longcontext_qa import LongContextQA, build_context, check_question, est_tokens, pick_span
from synth.stages.summaries_payloads import load_c4_sample
from tests.conftest import SAMPLES


def test_span_is_a_number_or_name_that_occurs_once():
    s = ("The bridge over the river was finished in 1932 by Acme Steel Works after 4 years of work, the mayor "
         "said at the opening.")
    sentence, span = pick_span(s, random.Random(0))
    assert sentence == s and span in {"1932", "Acme Steel Works", "4"}
    assert pick_span("No numbers or names here at all in this rather plain sentence.", random.Random(0)) is None
    assert pick_span("Call 780-800-7092 for a quote on your next heating job today.", random.Random(0)) is None


def test_context_reaches_target_and_places_gold_at_depth():
    docs = [" ".join([f"w{i}"] * 100) for i in range(30)]
    ctx, at = build_context(docs, 0, list(range(1, 30)), 1000, depth=0.5)
    assert ctx[at] == docs[0]
    assert 1000 <= sum(est_tokens(d) for d in ctx) <= 1000 * 1.05 + 130
    assert at == round(0.5 * (len(ctx) - 1))


def test_question_checks():
    assert check_question("In what year was the bridge finished?", "1932") is None
    assert check_question("Was it finished in 1932?", "1932") == "question_contains_answer"
    assert check_question("The bridge.", "1932") == "no_question"


def test_rows_answerable_from_exactly_one_document(scripted):
    pool = load_c4_sample(SAMPLES / "c4" / "c4_demo.jsonl.gz", limit=80)
    spec = scripted(lambda req, i: "Which detail does the passage give about this?")
    out = LongContextQA({"backend": spec, "target_tokens": 2048, "max_questions": 5})(pool)
    assert out.table.num_rows >= 3
    for r in out.table.to_pylist():
        docs = r["prompt"].split("\n\nAnswer the question")[0].split("Document [")[1:]
        holding = [i for i, d in enumerate(docs) if r["answer"].lower() in d.lower()]
        assert holding == [r["gold_doc_index"]]
        assert r["evidence"] in " ".join(docs[r["gold_doc_index"]].split())
        assert 1024 <= r["n_tokens_est"] <= 2048 * 1.05 + 2000
        assert r["response"].startswith(r["answer"])
    with pytest.raises(Exception, match="target_tokens"):
        LongContextQA({"target_tokens": 100})
