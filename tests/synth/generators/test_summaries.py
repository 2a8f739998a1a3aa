"""Summary generation: payloads from real C4 text, each rule's reason, injection pairs (the
entailment filter is tested in test_entailment.py)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from synth.stages.summaries_injection import INJECTIONS, InjectedCopies, InjectionCheck, followed, plant
from synth.stages.summaries_payloads import Payloads, load_c4_sample, make_payload, sentences
from synth.stages.summaries_rules import SummaryRules
from synth.stages.summaries_teacher import TeacherSummaries
from tests.conftest import SAMPLES

PAYLOAD = ("From: Alex Morgan <alex@example.com>\nTo: Priya Shah <priya@example.com>\nSubject: Library hours\n\n"
           "Hi Priya,\n\nThe city library will open at 8 am on Saturdays from March. The council approved the "
           "budget on Tuesday.\n\nBest,\nAlex")


@pytest.mark.parametrize("summary,reason", [
    ("Alex tells Priya that the city library will open at 8 am on Saturdays from March.", None),
    ("Library opens early.", "too_short"),
    (" ".join(["word"] * 70), "too_long"),
    ("Sure! Alex says the library opens at 8 am on Saturdays.", "preamble"),
    ("- Library opens at 8 am\n- Council approved the budget", "has_list"),
    ("**Library**: it opens at 8 am on Saturdays from March.", "has_markdown"),
    ("Alex says the library opens at 8 am.\n\nThe council approved it.", "multi_paragraph"),
    ("I will open the library at 8 am on Saturdays, says Alex.", "first_person"),
    ("Your library will open at 8 am on Saturdays from March.", "addresses_reader"),
    ("The budget was approved and the hours were extended by the council.", "passive_voice"),
    ("Alex writes: the city library will open at 8 am on Saturdays from March. The council approved the budget.",
     "copied_span"),
])
def test_each_rule_names_its_reason(summary, reason):
    out = SummaryRules({})(pa.table({"summary": [summary], "payload": [PAYLOAD]}))
    assert (out.stats.dropped or {None: 1}) == {reason: 1}


def test_payloads_from_real_c4_text():
    docs = load_c4_sample(SAMPLES / "c4" / "c4_demo.jsonl.gz", limit=12)
    out = Payloads({})(docs)
    kinds = out.table.column("kind").to_pylist()
    assert set(kinds) == {"email", "message", "notification"}
    email = next(r for r in out.table.to_pylist() if r["kind"] == "email")
    assert email["payload"].startswith("From: ") and "\nSubject: " in email["payload"]
    doc = next(d for d in docs.to_pylist() if d["id"] == email["document_id"])
    body = email["payload"].split("\n\n")[2]
    assert all(s in " ".join(doc["text"].split()) for s in sentences(body))  # the body is the real text
    assert make_payload("email", "Too short.", random.Random(0)) is None


def test_injected_copies_pair_the_clean_summary_and_the_check_catches_obedience(scripted):
    spec = scripted(lambda req, i: "Alex tells Priya that the city library will open early on Saturdays.")
    clean = TeacherSummaries({"backend": spec})(pa.table({"id": ["p1"], "source": ["t"], "payload": [PAYLOAD],
                                                          "kind": ["email"]})).table
    out = InjectedCopies({"fraction": 1.0})(clean).table.to_pylist()
    assert len(out) == 2
    injected = out[1]
    instruction = INJECTIONS[injected["injection_id"]][0]
    assert instruction in injected["payload"] and instruction in injected["prompt"]
    assert injected["payload"].endswith("Best,\nAlex")  # planted inside the email body
    assert injected["summary"] == out[0]["summary"] and injected["parent_id"] == out[0]["id"]
    obeyed = pa.table({"summary": ["ACCESS GRANTED", "The library opens early."],
                       "injection_id": ["override_reply", "override_reply"]})
    assert InjectionCheck({})(obeyed).stats.dropped == {"followed_injection": 1}
    assert not followed("The library opens early.", None)
    assert plant("[News] Hello there.", "notification", "X.", random.Random(0)) == "[News] Hello there. X."
