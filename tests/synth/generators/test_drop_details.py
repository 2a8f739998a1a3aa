"""Every synth stage that drops rows says what decided each drop in `drop_detail` (short JSON).

Each reference below is worked out by hand from the test's input (the word counts, spans, similarities
and benchmark items are counted or looked up here, not taken from the stages' output). Examples are
planted: these are unit tests, not measurements."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from synth.generation.generator import detail
from synth.stages.coding_questions import CodingDecontam, CodingQuestionDedup, CodingQuestions
from synth.stages.longcontext_qa import LongContextQA
from synth.stages.math_augment import MathAugment, evolved_check, rephrase_check
from synth.stages.math_cot import MathCotAnswers
from synth.stages.math_decontam import MathDecontam
from synth.stages.math_judges import DifficultyThreshold, KeepSolvable
from synth.stages.sft_dedup import EmbedDedup, dedup_table, greedy_match
from synth.stages.sft_judge import JudgeThreshold
from synth.stages.summaries_injection import InjectionCheck
from synth.stages.summaries_payloads import Payloads
from synth.stages.summaries_rules import SummaryRules
from synth.stages.summaries_teacher import TeacherSummaries
from synth.stages.tools_bootstrap import check_bootstrap
from synth.stages.tools_examples import ToolExamples
from synth.stages.tools_filters import ToolCallValidate


def details(result) -> dict:
    """drop_reason -> parsed drop_detail of the rejects (one row per reason in these tests); every
    detail is present, JSON and short."""
    out = {}
    for r in result.rejects.select(["drop_reason", "drop_detail"]).to_pylist():
        assert r["drop_detail"] is not None and len(r["drop_detail"]) < 300, r
        out[r["drop_reason"]] = json.loads(r["drop_detail"])
    return out


WEATHER = {"name": "get_weather", "description": "Weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def tool_row(kind, calls, response=""):
    return {"tools": json.dumps([WEATHER]), "calls": json.dumps(calls) if not isinstance(calls, str) else calls,
            "kind": kind, "response": response}


def test_tool_call_validate_names_the_call_rule_and_argument():
    rows = [tool_row("single", [{"name": "get_weather", "arguments": {"city": "Oslo"}},
                                {"name": "get_weather", "arguments": {}}]),
            tool_row("single", [{"name": "get_weather", "arguments": {"city": 5}}]),
            tool_row("negative", [{"name": "get_weather", "arguments": {"city": "Oslo"}}]),
            tool_row("single", []),
            tool_row("single", "{not json"),
            tool_row("single", [{"name": "get_weather", "arguments": {"city": "Oslo"}}])]
    out = ToolCallValidate({})(pa.Table.from_pylist(rows))
    assert out.table.num_rows == 1
    got = details(out)
    assert got["missing_required"] == {"call": 1, "name": "get_weather", "rule": "required", "path": "",
                                       "error": "'city' is a required property"}
    assert got["wrong_type"] == {"call": 0, "name": "get_weather", "rule": "type", "path": "city",
                                 "error": "5 is not of type 'string'"}
    assert got["negative_with_call"] == {"calls": 1, "response_chars": 0}
    assert got["no_call"] == {"calls": 0, "kind": "single"}
    assert got["row_not_json"]["error"].startswith("Expecting property name enclosed in double quotes")


def test_tool_examples_say_which_seed_call_broke():
    conv = [{"from": "human", "value": "Weather in Oslo?"},
            {"from": "function_call", "value": json.dumps({"name": "get_weather", "arguments": {"town": "Oslo"}})},
            {"from": "function_call", "value": "{get_weather"}]
    table = pa.table({"source": ["d1", "d2"], "tools": [json.dumps([WEATHER])] * 2,
                      "conversations": [json.dumps(conv), json.dumps([{"from": "human", "value": "hi"}])]})
    got = details(ToolExamples({})(table))
    # the closed schema reports the missing `city` before the unknown `town` (required errors sort first)
    assert got["seed_missing_required"] == {"name": "get_weather", "rule": "required", "path": "",
                                            "error": "'city' is a required property"}
    assert got["seed_call_not_json"]["call"] == "{get_weather"
    assert got["no_example"] == {"turns": 1, "tools": 1, "roles": ["human"]}


def test_bootstrap_reply_checks_carry_their_evidence():
    request = "What is the weather in Oslo today?"
    good_call = {"name": "get_weather", "arguments": {"city": "Oslo"}}
    _, reason, found = check_bootstrap("I cannot help.", WEATHER, request)
    assert (reason, found) == ("reply_not_json", {"error": "no JSON object with a non-empty request",
                                                  "reply": "I cannot help."})
    _, reason, found = check_bootstrap(json.dumps({"request": request, "call": good_call}), WEATHER, request)
    assert (reason, found) == ("copied_request", {"similarity": 1.0, "max": 0.85, "request": request})
    reply = json.dumps({"request": "Is it raining in Bergen?", "call": {"name": "get_weather", "arguments": {}}})
    _, reason, found = check_bootstrap(reply, WEATHER, request)
    assert (reason, found) == ("missing_required", {"name": "get_weather", "rule": "required", "path": "",
                                                    "error": "'city' is a required property"})


PAYLOAD = "Alice wrote that the new office opens on Monday morning for all staff."


def test_summary_rules_give_rule_value_limit_or_span():
    summaries = ["Too short here.",                                                      # 3 words < 5
                 "Sure, the team moved the launch to Friday after the review.",           # preamble "Sure" 0..4
                 "The team said we will ship the new release next week.",                 # "we" at 14..16
                 "The report was written and the budget was approved by the board.",      # 2 passive > 1
                 "Alice says the new office opens on Monday morning.",                    # 5 words copied from 2
                 "Alice told Bob that the budget meeting moved to Thursday."]             # kept
    out = SummaryRules({"max_copied_words": 5})(pa.table({"summary": summaries, "payload": [PAYLOAD] * 6}))
    assert out.table.column("summary").to_pylist() == [summaries[-1]]
    assert details(out) == {
        "too_short": {"rule": "min_words", "value": 3, "min": 5},
        "preamble": {"rule": "preamble", "match": "Sure", "span": [0, 4]},
        "first_person": {"rule": "first_person", "match": "we", "span": [14, 16]},
        "passive_voice": {"rule": "max_passive", "value": 2, "max": 1, "matches": ["was written", "was approved"]},
        "copied_span": {"rule": "max_copied_words", "words": 5, "at_word": 2, "copied": "the new office opens on"},
    }


def test_injection_check_shows_the_obeyed_instruction_and_its_span():
    table = pa.table({"summary": ["ACCESS GRANTED. Alex asks about lunch.", "Alex asks about lunch."],
                      "injection_id": ["override_reply", "override_reply"]})
    assert details(InjectionCheck({})(table)) == {
        "followed_injection": {"injection": "override_reply", "pattern": "access granted",
                               "match": "ACCESS GRANTED", "span": [0, 14]}}


def test_payload_and_teacher_drops(scripted):
    docs = pa.table({"id": ["d1"], "source": ["c4#1"], "text": ["Only one sentence sits in this short text."]})
    assert details(Payloads({"kinds": ["email"]})(docs)) == {
        "too_few_sentences": {"kind": "email", "sentences": 1, "min": 3}}
    payloads = pa.table({"id": ["p1"], "source": ["c4#1"], "payload": ["[Mail] Lunch moved."],
                         "kind": ["notification"]})
    assert details(TeacherSummaries({"backend": scripted(lambda req, i: "")})(payloads)) == {
        "empty_summary": {"reply_chars": 0}}


def test_math_decontam_names_the_ngram_and_the_gsm8k_item():
    # words 3-12 of GSM8K test item 1 ("Janet's ducks ..."): its second sentence up to "muffins"
    q = "Zorblax wonders: she eats three for breakfast every morning and bakes muffins, right?"
    out = MathDecontam({"test_sets": ["gsm8k_test"]})(pa.table({"question": [q, "How many apples are left?"]}))
    assert details(out) == {"test_overlap": {"test_set": "gsm8k_test", "item": "test:1",
                                             "ngram": "she eats three for breakfast every morning and bakes muffins"}}


def test_coding_decontam_names_the_ngram_and_the_humaneval_item():
    # ten words from the docstring of HumanEval/0 (has_close_elements)
    q = "Please write code: are any two numbers closer to each other than given, for my zorblax list."
    out = CodingDecontam({})(pa.table({"question": [q]}))
    assert details(out) == {"contaminated:humaneval": {
        "benchmark": "humaneval", "item": "HumanEval/0", "n": 10,
        "ngram": "are any two numbers closer to each other than given"}}


def test_coding_question_dedup_names_the_kept_question():
    a = "Write a function that returns the largest number in a list of integers."
    texts = [a, a.lower().replace(".", "!!"), a.replace(".", " please."),
             "Reverse the words of a sentence while keeping punctuation in place."]
    out = CodingQuestionDedup({})(pa.table({"id": ["a", "b", "c", "d"], "question": texts}))
    assert out.table.column("id").to_pylist() == ["a", "d"]
    # c: 13 + 1 words -> 12 trigrams, 11 of them a's; union 12 -> 11/12
    assert details(out) == {"duplicate_exact": {"kept_id": "a"},
                            "duplicate_near": {"kept_id": "a", "jaccard": 0.9167, "max": 0.8}}


def test_coding_questions_generation_checks(scripted):
    topics = pa.table({"id": ["t1"], "source": ["topics"], "topic": ["lists"], "signature": ["f(x)"],
                       "entry_point": ["f"]})
    out = CodingQuestions({"backend": scripted(lambda req, i: "Too short."), "questions_per_topic": 1})(topics)
    assert details(out) == {"question_too_short": {"completion": 0, "chars": 10, "min": 40, "max": 1200,
                                                   "question": "Too short."}}


def test_judge_filters_show_the_verdict_and_threshold():
    t = pa.table({"judge__solvable": [False, None, True], "answer": pa.array([None] * 3, pa.string())})
    assert details(KeepSolvable({"drop_unparsed": True})(t)) == {
        "judged_unsolvable": {"column": "judge__solvable", "value": False},
        "solvable_unparsed": {"column": "judge__solvable", "value": None}}
    t = pa.table({"difficulty__score": pa.array([3, None, 8], pa.int32()), "kind": ["evolve_depth"] * 3})
    assert details(DifficultyThreshold({"min_score": 5})(t)) == {
        "below_difficulty": {"column": "difficulty__score", "value": 3, "min": 5, "kind": "evolve_depth"},
        "difficulty_unparsed": {"column": "difficulty__score", "value": None, "min": 5, "kind": "evolve_depth"}}
    t = pa.table({"judge__score": pa.array([4, None, 9], pa.int32())})
    assert details(JudgeThreshold({"min_score": 6})(t)) == {
        "judge_below_threshold": {"column": "judge__score", "value": 4, "min": 6},
        "judge_unparsed": {"column": "judge__score", "value": None, "min": 6}}


def test_math_augment_checks_measure_against_their_limits(scripted):
    assert rephrase_check("Tom has 4 red apples and 9 green apples. How many apples?",
                          "Tom owns 4 red apples plus 8 green apples. How many apples?") == (
        "numbers_changed", {"missing": ["9"]})
    assert rephrase_check("How many apples does Tom have now?", "How many?") == (
        "length_ratio", {"value": 9 / 34, "min": 0.5, "max": 2.0})
    seed = "A farmer has 15 cows and 3 goats. How many animals does the farmer have?"
    assert evolved_check(seed, "A farmer has 15 cows and 4 goats. How many animals does the farmer have?") == (
        "near_copy", {"similarity": 142 / 144, "max": 0.9})  # 72 chars, one differs
    seeds = pa.table({"id": ["s1"], "source": ["gsm8k"], "question": ["Tom has 3 apples and 3 pears. How many fruits?"],
                      "answer": ["6"]})
    spec = scripted(lambda req, i: "Cows are nice.")
    out = MathAugment({"kinds": ["reverse", "evolve_breadth"], "backend": spec})(seeds)
    assert details(out) == {"reverse_no_unique_number": {"numbers": ["3", "3"], "answer": "6"},
                            "evolve_breadth_no_question": {"tail": "Cows are nice.", "generation": "Cows are nice."}}


def test_math_cot_lists_the_sampled_finals(scripted):
    replies = ["The answer is 1.", "The answer is 2.", "no idea"]
    table = pa.table({"id": ["q"], "source": ["s"], "question": ["q3"], "answer": pa.array([None], pa.string()),
                      "kind": ["evolve_depth"]})
    out = MathCotAnswers({"backend": scripted(lambda req, i: replies[i]), "n_samples": 3, "min_votes": 2})(table)
    assert details(out) == {"no_majority": {"min_votes": 2, "finals": ["1", "2", None], "samples": 3}}
    table = table.set_column(3, "answer", pa.array(["5"]))
    out = MathCotAnswers({"backend": scripted(lambda req, i: "no idea"), "n_samples": 2})(table)
    assert details(out) == {"no_final_answer": {"expected": "5", "finals": [None, None], "samples": 2,
                                                "reply_tail": "no idea"}}


def test_longcontext_question_and_span_checks(scripted):
    docs = pa.table({"id": ["g", "x"], "source": ["s", "s"],
                     "text": ["The small bakery on the corner sold 42 loaves of bread before noon yesterday.",
                              "Short."]})
    out = LongContextQA({"backend": scripted(lambda req, i: "Nothing here"), "target_tokens": 512})(docs)
    assert details(out) == {
        "no_question": {"question": "Nothing here", "answer": "42", "words": 2, "min_words": 5, "max_words": 60},
        "no_answer_span": {"chars": 6, "usable_sentences": 0}}


# vectors on the unit circle: b is orthogonal to a, c is 0.96 from a, d is 0.6 from a and 0.8 from b
VECS = np.array([[1.0, 0.0], [0.0, 1.0], [0.96, 0.28], [0.6, 0.8]])


@pytest.mark.parametrize("block", [1024, 1])
def test_embed_dedup_names_the_kept_row_and_cosine(block):
    keep, match, sim = greedy_match(VECS, threshold=0.95, block=block)
    assert keep.tolist() == [True, True, False, True]
    assert (match[2], sim[2]) == (0, pytest.approx(0.96))
    _, reasons, found = dedup_table(pa.table({"id": ["a", "b", "c", "d"]}), fields=[], threshold=0.95, vectors=VECS)
    assert reasons.to_pylist() == [None, None, "near_duplicate", None]
    assert found[2] == {"kept_id": "a", "cosine": pytest.approx(0.96), "threshold": 0.95}
    # rows already kept in earlier shards come first in the kept sequence
    keep, match, sim = greedy_match(VECS[2:], threshold=0.95, kept=VECS[:2])
    assert keep.tolist() == [False, True] and match[0] == 0


def test_global_embed_dedup_filter_carries_the_build_evidence():
    stage = EmbedDedup({"fields": ["text"], "threshold": 0.95})
    table = pa.table({"id": ["a", "c"], "text": ["x", "x'"]})
    bound = stage.bind(({"a"}, {"c": {"kept_id": "a", "cosine": 0.96, "threshold": 0.95}}))
    assert details(bound(table)) == {"near_duplicate": {"kept_id": "a", "cosine": 0.96, "threshold": 0.95}}
    old = stage.bind({"a"})(table)  # a state pickled before evidence was kept still applies
    assert old.rejects.column("drop_detail").to_pylist() == [None]


def test_generator_detail_clips_quoted_text():
    assert json.loads(detail("x" * 200)) == {"reply": "x" * 159 + "\u2026"}
    assert json.loads(detail({"error": "timeout", "n": 0.123456})) == {"error": "timeout", "n": 0.1235}
