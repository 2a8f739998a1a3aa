"""Math generator stages with a scripted backend: what is kept, what is dropped and why."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from manifests.errors import ConfigError
from synth.stages.math_augment import MathAugment, check_rephrase, reverse_question
from synth.stages.math_cot import MathCotAnswers, majority
from synth.stages.math_decontam import MathDecontam
from synth.stages.math_judges import DifficultyJudge, DifficultyThreshold, KeepSolvable, SolvabilityJudge, parse_yes_no
from synth.math.seeds import load_gsm8k

NATALIA = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
           "How many clips did Natalia sell altogether in April and May?")

REPO = Path(__file__).resolve().parents[3]


def seeds(question=NATALIA, answer="72"):
    return pa.table({"id": ["s1"], "source": ["gsm8k/train.jsonl:1"], "question": [question], "answer": [answer]})


def test_rephrase_kept_only_when_every_number_survives(scripted):
    # identical prompts are generated once by the backend, so the second seed differs a little
    other = NATALIA.replace("clips", "pins")
    replies = {NATALIA: "Rewritten problem: In April Natalia sold clips to 48 friends; in May she sold half as "
                        "many. How many clips did she sell in April and May together?",
               other: "Natalia sold pins to 12 + 7 = 9 of her friends in April, and half as many pins in May. "
                      "How many pins did Natalia sell in April and May altogether?"}
    spec = scripted(lambda req, i: replies[req.messages[-1]["content"].split("Problem: ")[1].split("\n")[0]])
    kept = MathAugment({"kinds": ["rephrase"], "backend": spec})(pa.concat_tables([seeds(), seeds(other)]))
    assert kept.table.num_rows == 1
    row = kept.table.to_pylist()[0]
    assert row["question"].startswith("In April")  # the echoed label is stripped
    assert row["answer"] == "72" and row["kind"] == "rephrase" and row["parent_id"] == "s1"
    assert row["gen_backend"] == "scripted" and row["gen_template_id"] == "math_rephrase"
    assert kept.stats.dropped == {"rephrase_numbers_changed": 1}
    assert kept.rejects.column("drop_reason").to_pylist() == ["rephrase_numbers_changed"]


def test_check_rephrase_reasons():
    assert check_rephrase(NATALIA, NATALIA) == "unchanged"
    assert check_rephrase(NATALIA, "") == "empty_generation"
    assert check_rephrase(NATALIA, "How many?") == "length_ratio"


def test_reversion_hides_a_number_and_states_the_answer():
    text, hidden = reverse_question(NATALIA, "72")
    assert hidden == "48"
    assert "x of her friends" in text and "48" not in text and "is 72" in text
    assert reverse_question("Tom has 3 apples and 3 pears. How many fruits?", "6") is None  # no unique number


def test_evolution_without_question_is_dropped_and_has_no_ground_truth(scripted):
    spec = scripted(lambda req, i: ("A farmer has 15 cows and buys 3 times as many goats. How many animals "
                                    "does he have?" if req.template_id == "math_evolve_depth" else "Cows are nice."))
    out = MathAugment({"kinds": ["evolve_depth", "evolve_breadth"], "backend": spec})(seeds())
    assert out.table.column("kind").to_pylist() == ["evolve_depth"]
    assert out.table.column("answer").to_pylist() == [None]
    assert out.stats.dropped == {"evolve_breadth_no_question": 1}


def test_cot_keeps_answers_matching_ground_truth_else_majority(scripted):
    sols = {"q1": ["48 + 24 = 72. The answer is 72.", "The answer is 70.", "So \\boxed{72}"],
            "q2": ["The answer is 10.", "The answer is 10.0", "The answer is 3."],
            "q3": ["The answer is 1.", "The answer is 2.", "no idea"]}
    spec = scripted(lambda req, i: sols[next(k for k in sols if k in req.messages[-1]["content"])][i])
    table = pa.table({"id": ["a", "b", "c"], "source": ["x"] * 3, "question": ["q1", "q2", "q3"],
                      "answer": ["72", None, None], "kind": ["seed", "evolve_depth", "evolve_breadth"]})
    out = MathCotAnswers({"backend": spec, "n_samples": 3, "min_votes": 2, "max_kept_per_question": 2})(table)
    rows = out.table.to_pylist()
    assert [(r["question_id"], r["final_answer"], r["checked_by"], r["votes"]) for r in rows] == [
        ("a", "72", "ground_truth", 2), ("a", "72", "ground_truth", 2),
        ("b", "10", "majority_vote", 2), ("b", "10.0", "majority_vote", 2)]
    assert out.stats.dropped == {"no_majority": 1}
    assert majority(["1", "2", None], min_votes=1) == (None, 1)  # a tie is no majority


def test_judges_score_then_decide(scripted):
    spec = scripted(lambda req, i: {"math_solvable_judge": {"q1": "Yes.", "q2": "No, it lacks data", "q3": "hmm"},
                                    "math_difficulty_judge": {"q1": "Rating: 8", "q2": "3", "q3": "Rating: 2"}}
                    [req.template_id][req.messages[-1]["content"].split("Problem: ")[1].split("\n")[0]])
    t = pa.table({"question": ["q1", "q2", "q3"], "kind": ["evolve_depth", "evolve_depth", "rephrase"]})
    t = SolvabilityJudge({"backend": spec})(t).table
    assert t.column("judge__solvable").to_pylist() == [True, False, None]
    solvable = KeepSolvable({})(t)
    assert solvable.stats.dropped == {"judged_unsolvable": 1}
    t = DifficultyJudge({"backend": spec})(solvable.table).table
    assert t.column("difficulty__score").to_pylist() == [8, 2]
    # the threshold applies to the depth set only: the easy rephrase stays
    assert DifficultyThreshold({"min_score": 5})(t).table.column("question").to_pylist() == ["q1", "q3"]
    assert parse_yes_no("YES") is True and parse_yes_no("maybe") is None


def test_decontam_drops_test_questions_not_train(monkeypatch):
    from corpus.decontam.benchmarks import raw_items

    monkeypatch.delenv("CIDERMILL_BENCHMARKS", raising=False)
    test_q = next(raw_items("gsm8k")).segments[0]  # the GSM8K test copy shipped for decontamination
    train = load_gsm8k(REPO / "data/samples/gsm8k/train_short64.jsonl", limit=20)
    table = pa.table({"question": [test_q, "Rewritten: " + test_q, *train.column("question").to_pylist()]})
    out = MathDecontam({})(table)
    assert out.stats.dropped == {"test_overlap": 2}
    assert out.table.num_rows == 20
    # asdiv is not shipped (CC-BY-NC): asking for it without a folder fails at config time
    with pytest.raises(ConfigError, match="asdiv.*CC-BY-NC.*math_eval_harness/asdiv/test.jsonl"):
        MathDecontam({"test_sets": ["gsm8k_test", "asdiv"]})


def test_test_splits_are_refused_as_seeds(tmp_path):
    (tmp_path / "test.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n')
    with pytest.raises(ValueError, match="refusing a test split"):
        load_gsm8k(tmp_path / "test.jsonl")


def test_config_errors_say_the_fix():
    with pytest.raises(ConfigError, match="unknown kinds"):
        MathAugment({"kinds": ["rephrase", "invert"]})
    with pytest.raises(ConfigError, match="min_votes"):
        MathCotAnswers({"n_samples": 2, "min_votes": 3})


def test_solvability_judge_asks_only_about_questions_without_ground_truth(scripted):
    asked = []
    spec = scripted(lambda req, i: asked.append(req.messages[-1]["content"]) or "no")
    t = pa.table({"question": ["seed q", "evolved q"], "answer": ["3", None], "kind": ["seed", "evolve_depth"]})
    scored = SolvabilityJudge({"backend": spec})(t).table
    assert scored.column("judge__solvable").to_pylist() == [None, False]
    assert len(asked) == 1 and "evolved q" in asked[0]
    out = KeepSolvable({"drop_unparsed": True})(scored)
    assert out.table.column("question").to_pylist() == ["seed q"]
    assert out.stats.dropped == {"judged_unsolvable": 1}


def test_quoted_problem_is_taken_out_of_chatter():
    from synth.stages.math_augment import clean_generation

    reply = ('A more challenging math problem:\n\n"Jack buys a dozen oranges at 2 dollars each and 5 pears at 1 '
             'dollar each. How much does he spend?"\n\nThis problem needs more steps.')
    assert clean_generation(reply).startswith("Jack buys") and clean_generation(reply).endswith("spend?")
    assert clean_generation("Rewritten problem: Tom has 3 apples. How many?") == "Tom has 3 apples. How many?"
