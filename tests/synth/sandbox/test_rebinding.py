"""A solution must not change what the tests' names mean (issue 36, class 1).

The task: `frac(x)`, the fractional part of x. Each trick below is a wrong `frac` that rebinds a
name its tests use (a builtin, an import, a module the tests import) so that the assertion holds
anyway. Every test runs in four forms: top-level asserts or a HumanEval-style `check(candidate)`
helper, each with the entry points inferred or named by the task; every trick must fail in every
form, at both isolation levels, and the honest solution must pass in every form.
"""

from __future__ import annotations

import pytest

from synth.sandbox import split_tests

HONEST = "import math\ndef frac(x):\n    return x - math.floor(x)\n"

# name -> (set-up lines the tests need, an assertion on `candidate` the honest frac passes, the trick)
TRICKS = {
    # Won on the code before issue 36: the solution's callable became the tests' name, or its
    # import ran in the tests process.
    "def_abs": ("", "abs(candidate(3.5) - 0.5) < 1e-6", "def abs(x):\n    return 0\ndef frac(x):\n    return 99\n"),
    "lambda_sorted": ("", "sorted([candidate(1.5), candidate(0.25)]) == [0.25, 0.5]",
                      "sorted = lambda xs: [0.25, 0.5]\ndef frac(x):\n    return 7\n"),
    "def_isinstance": ("", "isinstance(candidate(1.5), float)",
                       "def isinstance(*a):\n    return True\ndef frac(x):\n    return 'no'\n"),
    "alias_round": ("", "round(candidate(2.25), 2) == 0.25",
                    "def _r(x, n):\n    return 0.25\nround = _r\ndef frac(x):\n    return 99\n"),
    "from_import_alias": ("", "isinstance(candidate(1.5), float)",
                          "from unittest.mock import MagicMock as isinstance\ndef frac(x):\n    return 5\n"),
    "import_alias_abs": ("", "abs(candidate(3.5) - 0.5) < 1e-6",
                         "from math import floor as abs\ndef frac(x):\n    return -7.3\n"),
    "from_import_alias_all": ("", "all(0 <= candidate(x) < 1 for x in (0.5, 1.75))",
                              "from unittest.mock import MagicMock as all\ndef frac(x):\n    return 5\n"),
    # Always lost (the solution runs in its own process), kept as regressions.
    "builtins_mutation": ("", "abs(candidate(3.5) - 0.5) < 1e-6",
                          "import builtins\nbuiltins.abs = lambda x: 0\ndef frac(x):\n    return 99\n"),
    "dunder_builtins": ("", "abs(candidate(3.5) - 0.5) < 1e-6",
                        "__builtins__.abs = lambda x: 0\ndef frac(x):\n    return 99\n"),
    "math_isclose_patch": ("import math", "math.isclose(candidate(7.75), 0.75)",
                           "import math\nmath.isclose = lambda *a, **k: True\ndef frac(x):\n    return 99\n"),
    "operator_patch": ("import operator", "operator.eq(candidate(1.5), 0.5)",
                       "import operator\noperator.eq = lambda a, b: True\ndef frac(x):\n    return 99\n"),
    "shadow_a_tests_import": ("import statistics as st", "st.mean([candidate(1.5), candidate(2.5)]) == 0.5",
                              "import math as st\ndef st(*a):\n    return 0.5\ndef frac(x):\n    return 99\n"),
    "define_the_tests_helper": ("def close(a, b):\n    return abs(a - b) < 1e-9", "close(candidate(1.5), 0.5)",
                                "def close(a, b):\n    return True\ndef frac(x):\n    return 99\n"),
}


def source_for(setup: str, assertion: str, form: str) -> str:
    if form == "top-level":
        return f"{setup}\nassert {assertion.replace('candidate', 'frac')}\n"
    return f"{setup}\ndef check(candidate):\n    assert {assertion}\n\ncheck(frac)\n"


FORMS = [("top-level", None), ("top-level", ["frac"]), ("check", None), ("check", ["frac"])]


@pytest.mark.parametrize("form,entry", FORMS)
@pytest.mark.parametrize("name", sorted(TRICKS))
def test_the_honest_solution_passes_these_tests(box, name, form, entry):
    setup, assertion, _ = TRICKS[name]
    j = box.judge(HONEST, source_for(setup, assertion, form), entry_points=entry, timeout_s=3)
    assert j.passed, (name, form, j.tests)


@pytest.mark.parametrize("form,entry", FORMS)
@pytest.mark.parametrize("name", sorted(TRICKS))
def test_a_rebinding_trick_fails(box, name, form, entry):
    setup, assertion, trick = TRICKS[name]
    j = box.judge(trick, source_for(setup, assertion, form), entry_points=entry, timeout_s=3)
    assert j.verdict == "failed" and j.n_passed == 0, (name, form, entry, j.decided_by, j.tests)


def test_the_same_tricks_win_when_names_are_shared(box):
    # The tricks are real: where the tests see the solution's top-level names (one program), they pass.
    for name in ("def_abs", "lambda_sorted", "def_isinstance", "alias_round", "from_import_alias",
                 "from_import_alias_all", "import_alias_abs"):
        setup, assertion, trick = TRICKS[name]
        r = box.run(trick + "\n" + source_for(setup, assertion, "top-level"))
        assert r.verdict.value == "passed", (name, r.reason)


def test_humaneval_style_prelude_and_task_entry_point(box):
    # HumanEval's shape: the prompt is trusted prelude, the task names the entry point.
    prelude = "import math\n\ndef frac(x):\n    \"\"\"The fractional part of x.\"\"\"\n"
    tests = "def check(candidate):\n    assert abs(candidate(3.5) - 0.5) < 1e-6\n    " \
            "assert isinstance(candidate(1.25), float)\n\ncheck(frac)\n"
    honest = prelude + "    return x - math.floor(x)\n"
    assert box.judge(honest, tests, prelude=prelude, entry_points=["frac"]).passed
    for trick in ("from math import floor as abs\nfrom unittest.mock import MagicMock as isinstance\n"
                  "def frac(x):\n    return -7.3\n",
                  "def abs(x):\n    return 0\ndef isinstance(*a):\n    return True\ndef frac(x):\n    return 9\n"):
        j = box.judge(prelude + "    pass\n" + trick, tests, prelude=prelude, entry_points=["frac"])
        assert j.verdict == "failed", (trick, j.tests)


def test_a_task_may_name_an_entry_point_that_shadows_a_builtin(box):
    # The rule's one exception: the task says `max` is the solution's, so the tests' `max` is.
    sol = "def max(xs):\n    return sorted(xs)[-1] + 1\n"
    j = box.judge(sol, "assert max([1, 5, 2]) == 6\n", entry_points=["max"])
    assert j.passed and j.decided_by == "tests process"
    assert box.judge(sol, "assert max([1, 5, 2]) == 6\n").verdict == "failed"   # inferred: max is the builtin


def test_which_names_are_the_solutions():
    from synth.sandbox.names import entry_points, free, modules_for_tests

    steps = split_tests("import math\nx = 3\ndef helper(v):\n    global seen\n    seen = v\n    return abs(v)\n"
                        "assert frac(x) == helper(len(y))\nassert math.pi + z\n")
    # Free: used, not a builtin, bound by neither the prelude nor the tests (helper's `v` is its own).
    assert free(steps, prelude="z = 1\n") == {"frac", "y"}
    solution = "import math\nimport os.path\nimport json as y\nfrom re import sub as frac2\n" \
               "def frac(v):\n    return v\ndef abs(v):\n    return 0\nhelper = frac\nz = frac\n"
    assert entry_points(solution, steps, prelude="z = 1\n") == ["frac"]
    # Only a plain import whose name is free crosses (here none: math is imported by the tests).
    assert modules_for_tests(solution, steps, "z = 1\n", ["frac"]) == []
    assert modules_for_tests("import math, os.path\nimport json as j\n", split_tests("assert f(math.pi, os.sep, j)"),
                             "", ["f"]) == ["math", "os.path"]


def test_a_star_import_of_the_prelude_keeps_its_names(box):
    # The parent cannot know what `from os.path import *` binds (it imports nothing of the tests'); the tests
    # process binds an inferred entry point only where the prelude left the name unbound.
    prelude = "from os.path import *\n"
    tests = "assert join('a', frac(1.5)) == 'a/0.5'\n"
    honest = "def frac(x):\n    return str(x - int(x))\n"
    cheat = "def join(*a):\n    return 'a/0.5'\ndef frac(x):\n    return 'wrong'\n"
    assert box.judge(honest, tests, prelude=prelude).passed
    assert box.judge(cheat, tests, prelude=prelude).verdict == "failed"


def test_a_reference_solution_names_the_tasks_entry_points(box):
    # MBPP/126: the task's function is called `sum`. Inferred, `sum` is the builtin (the rule); read off
    # the task's trusted reference, it is the entry point, and a solution can still add no other name.
    from synth.checkers import reference_entry_points

    reference = "def sum(a, b):\n    return sum_of_divisors(a, b)\ndef sum_of_divisors(a, b):\n" \
                "    return __builtins__.sum(i for i in range(1, min(a, b)) if a % i == 0 and b % i == 0)\n"
    tests = ["assert sum(10, 15) == 6", "assert sum(4, 6) == 3"]
    assert reference_entry_points(reference, tests) == ["sum"]
    honest = "def sum(a, b):\n    t = 0\n    for i in range(1, min(a, b)):\n        if a % i == 0 and b % i == 0:\n" \
             "            t += i\n    return t\n"
    assert box.judge(honest, tests, entry_points=["sum"]).passed
    assert box.judge(honest, tests).verdict == "failed"   # inferred: the builtin sum(10, 15) raises
    cheat = "def sum(a, b):\n    return 0\ndef abs(x):\n    return 0\n"
    assert box.judge(cheat, ["assert abs(sum(10, 15) - 6) == 0"], entry_points=["sum"]).verdict == "failed"


def test_a_name_the_prelude_binds_is_the_preludes(box):
    # Before issue 36 only the prelude's def/class/import names were kept from the solution: a helper the
    # prelude binds by assignment (`close = functools.partial(...)`) could be replaced by the solution's.
    prelude = "import functools, math\nclose = functools.partial(math.isclose, rel_tol=1e-9)\nTOL = 1e-6\n"
    tests = "assert close(frac(1.5), 0.5)\nassert abs(frac(2.25) - 0.25) < TOL\n"
    assert box.judge(HONEST, tests, prelude=prelude).passed
    cheat = "def close(*a, **k):\n    return True\ndef TOL():\n    return 0\ndef frac(x):\n    return 99\n"
    j = box.judge(cheat, tests, prelude=prelude)
    assert j.results == [0, 0], j.tests
