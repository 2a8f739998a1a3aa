"""Answer equivalence on real MATH answers (MATH-500 from the shared benchmarks)."""

from __future__ import annotations

import json
import random

import pytest

from synth.math.answers import answers_equal, extract_final, gsm8k_final, last_boxed, normalize


@pytest.fixture(scope="module")
def math500(shared_data):
    path = shared_data / "benchmarks" / "math_eval_harness" / "math_oai" / "test.jsonl"
    return [json.loads(line) for line in path.open()]


def test_boxed_answer_of_every_real_solution_equals_its_reference(math500):
    # The solution's \boxed{} and the dataset's `answer` field are written differently in places
    # (\dfrac vs \frac, spacing, \left( ... \right)); all 500 must still match.
    mismatched = [(last_boxed(r["solution"]), r["answer"]) for r in math500
                  if not answers_equal(last_boxed(r["solution"]), r["answer"])]
    assert mismatched == []


def _reformat(ans: str) -> str:
    """How a model writes the same answer differently: dfrac, spaces, $...$, a trailing period."""
    return "$" + ans.replace("\\frac", "\\dfrac").replace(",", ", ") + "$."


def test_real_answers_survive_reformatting(math500):
    assert all(answers_equal(_reformat(r["answer"]), r["answer"]) for r in math500)


def test_different_real_answers_do_not_match(math500):
    answers = sorted({r["answer"] for r in math500})
    rng = random.Random(0)
    false_matches = []
    for _ in range(2000):
        a, b = rng.sample(answers, 2)
        if answers_equal(a, b) and normalize(a) != normalize(b):
            false_matches.append((a, b))
    # the only allowed matches are true equivalences written differently, e.g. 0.5 vs \frac12
    assert all(answers_equal(str(eval_num(a)), b) for a, b in false_matches if eval_num(a) is not None)


def eval_num(s):
    try:
        return float(s)
    except ValueError:
        return None


@pytest.mark.parametrize("a,b", [
    ("\\frac{14}{3}", "14/3"), ("\\frac{14}{3}", "4.6666666667"), ("\\dfrac{3}{56}", "\\frac3{56}"),
    ("3\\sqrt{13}", "\\sqrt{117}"), ("11\\sqrt2", "11\\sqrt{2}"), ("90^\\circ", "90"), ("x=5", "5"),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3,\\frac{\\pi}{2})"), ("\\text{Evelyn}", "Evelyn"),
    ("6 - 5i", "6-5i"), ("1,-2", "1, -2"), ("2220", "2,220"),
    ("\\$18.90", "18.9"), ("10\\%", "10"), ("p - q", "-q + p"), ("\\pi", "3.14159265"),
])
def test_equivalent_forms(a, b):
    assert answers_equal(a, b)


@pytest.mark.parametrize("a,b", [
    ("\\frac{14}{3}", "\\frac{3}{14}"), ("(1,2)", "(2,1)"), ("(1,2)", "[1,2]"), ("3\\sqrt{13}", "3\\sqrt{12}"),
    ("6-5i", "6+5i"), ("52_8", "52"), ("9", "-9"), ("", "0"), (None, "1"), ("1, 2", "1, 2, 3"),
])
def test_non_equivalent_forms(a, b):
    assert not answers_equal(a, b)


def test_extraction():
    assert last_boxed("so \\boxed{\\frac{1}{2}} and then \\boxed{\\left(3, \\frac{\\pi}{2}\\right)}") \
        == "\\left(3, \\frac{\\pi}{2}\\right)"
    assert last_boxed("unbalanced \\boxed{\\frac{1}{2}") is None
    assert gsm8k_final("She makes 9 * 2 = $<<9*2=18>>18 every day.\n#### 1,018") == "1018"
    assert extract_final("12 + 7 = 19. The answer is 19.") == "19"
    assert extract_final("Step 1 ... \\boxed{42}") == "42"
    assert extract_final("no final answer here") is None
