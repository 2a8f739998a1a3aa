"""The judge's contract: what a test is, what crosses, what a failure says, and that nothing raises."""

from __future__ import annotations

import pytest

from synth.sandbox import split_tests


def test_split_tests_top_level_asserts_and_expressions_are_tests():
    steps = split_tests("import math\n'''doc'''\nassert f(1) == 2\nx = 3\ncheck(f)\nassert f(x) == 6, 'msg'\n")
    assert steps == [("setup", "import math"), ("setup", "'''doc'''"), ("test", "assert f(1) == 2"),
                     ("setup", "x = 3"), ("test", "check(f)"), ("test", "assert f(x) == 6, 'msg'")]
    assert split_tests(["assert f(1) == 2", "y = f(2)\nassert y == 4"]) == [
        ("test", "assert f(1) == 2"), ("test", "y = f(2)\nassert y == 4")]


def test_tests_that_do_not_parse_are_the_callers_error():
    with pytest.raises(ValueError, match="line 2"):
        split_tests("assert f(1) == 2\nassert f(\n")
    with pytest.raises(ValueError, match="test 1 does not parse"):
        split_tests(["assert f(1) == 2", "assert ("])


def test_each_test_gets_its_own_verdict_and_reason(box):
    sol = "def f(x):\n    if x == 3:\n        raise ValueError('three')\n    if x == 4:\n        while True: pass\n" \
          "    return x + 1\n"
    tests = ["assert f(1) == 2", "assert f(1) == 3", "f(3)", "assert f(4) == 5", "assert f(5) == 6",
             "try:\n    f(3)\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError('no raise')"]
    j = box.judge(sol, tests, timeout_s=1.0)
    assert j.results == [1, 0, 0, 0, 1, 1]
    assert j.tests[1].reason == "AssertionError: " and j.tests[2].reason == "ValueError: three"
    assert "no answer within the per-test time limit (1s)" in j.tests[3].reason
    assert (j.verdict, j.n_passed, j.n_tests) == ("failed", 3, 6)


def test_a_solution_that_does_not_load_fails_every_test_with_the_reason(box):
    j = box.judge("def f(x:\n", ["assert f(1) == 1", "assert f(2) == 2"])
    assert j.results == [0, 0] and all("SyntaxError" in t.reason for t in j.tests)


def test_the_prelude_is_trusted_and_the_solution_cannot_replace_it(box):
    prelude = "def poly(xs, x):\n    return sum(c * x**i for i, c in enumerate(xs))\n"
    tests = "assert abs(poly([-1, 1], find_zero([-1, 1]))) < 1e-6\n"
    honest = prelude + "def find_zero(xs):\n    return 1.0\n"
    cheat = "def poly(xs, x):\n    return 0\ndef find_zero(xs):\n    return 42.0\n"
    assert box.judge(honest, tests, prelude=prelude, entry_points=["find_zero"]).passed
    assert box.judge(cheat, tests, prelude=prelude, entry_points=["find_zero"]).verdict == "failed"


def test_state_and_arguments_cross_as_values(box):
    sol = "calls = []\ndef push(x):\n    calls.append(x)\n    return list(calls)\n" \
          "def pair(a, b=0, *, c=1):\n    return (a, b, c, {a: {b}})\n"
    tests = "assert push(1) == [1]\nassert push(2) == [1, 2]\nassert pair(1, c=3) == (1, 0, 3, {1: {0}})\n" \
            "assert isinstance(pair(1)[3], dict)\nassert pair(2)[:2] == (2, 0)\n"
    assert box.judge(sol, tests).results == [1, 1, 1, 1, 1]


def test_hostile_outputs_are_candidate_failures_never_the_callers(box):
    tests = ["assert f(1) == 2"]
    spray = "import os\ndef spray(data):\n    for fd in range(20):\n        try:\n            os.write(fd, data)\n" \
            "        except OSError:\n            pass\n"
    hostile = [spray + "def f(x):\n    spray(b'\\xff\\xfe not json\\n')\n    return 3",
               spray + "def f(x):\n    spray(b'{\"n\": 1, \"k\": 1, \"ok\": true, \"v\": [\"i\", \"2\"]}\\n')\n    return 3",
               spray + "def f(x):\n    spray(b'[' * 100000)\n    return 3",
               "import os\ndef f(x):\n    for fd in range(3, 20):\n        try:\n            os.close(fd)\n"
               "        except OSError:\n            pass\n    return 3",
               "import os, signal\ndef f(x):\n    os.kill(os.getpid(), signal.SIGSTOP)",
               "def f(x):\n    return " + "[" * 80 + "]" * 80,
               "def f(x):\n    return 'x' * (10 * 1024 * 1024)",
               "def f(x):\n    yield 2"]
    js = box.judge_many([{"solution": s, "tests": tests, "timeout_s": 1.0} for s in hostile])
    assert [j.verdict for j in js] == ["failed"] * len(hostile)
    assert all(j.reason for j in js)
    assert box.judge("def f(x):\n    return 2 * x", tests).passed


def test_tests_may_use_the_solutions_plain_imports_but_not_its_aliases_or_constants(box):
    # `import math` names the module itself; an alias or a from-import is the solution choosing what
    # a name of the tests means, so that name stays free (a NameError, as in a fresh interpreter).
    sol = "import math\nfrom collections import Counter as C\nLIMIT = 3\ndef area(r):\n    return math.pi * r * r\n" \
          "alias = area\n"
    tests = ["assert math.isclose(area(1), math.pi)", "assert alias(0) == 0", "assert C('aab')['a'] == 2",
             "assert LIMIT == 3"]
    j = box.judge(sol, tests)
    assert j.results == [1, 1, 0, 0] and "NameError" in j.tests[2].reason and "NameError" in j.tests[3].reason


def test_which_tests_the_parent_decides():
    from synth.sandbox import direct

    def plans(tests, stubs=("f",), prelude=""):
        return direct.plan(split_tests(tests), list(stubs), prelude)

    decided = ["assert f(1) == 2", "assert f('a', k=[1, (2,)]) != {'x': {1}}", "assert not f(0)",
               "assert f(2) is None", "assert abs(f(0.5) - 0.25) < 1e-9", "assert math.isclose(f(1), 2.0, rel_tol=1e-6)",
               "assert sorted(f([3, 1])) == [1, 3]",
               "assert f(-1) in (1, 2)", "assert f(3)", "assert 0 <= f(5) < 10"]
    for test in decided:
        assert plans([test]) is not None, test
    assert len(plans(decided)) == len(decided)
    for needs_tests_process in (["assert f(f(1)) == 2"], ["assert f(x) == 1"], ["x = 1", "assert f(1) == x"],
                                ["assert f(1) ** 2 == 4"], ["assert f(1).real == 1"], ["assert g(f(1)) == 1"],
                                ["assert f(*[1]) == 1"], ["check(f)"], ["assert f(1) == 1\nassert f(2) == 2"]):
        assert plans(needs_tests_process) is None, needs_tests_process
    assert plans(["assert f(1) == 2"], prelude="def helper(): pass") is None


def test_the_parents_evaluator_builds_nothing_huge():
    from synth.sandbox import direct

    [p] = direct.plan(split_tests(["assert f(1) * 3 == 'xxx'"]), ["f"], "")
    assert p.holds(3) == (False, "AssertionError: the call returned 3")
    assert p.holds("x")[0] is False and "only between numbers" in p.holds("x")[1]
    [q] = direct.plan(split_tests(["assert f(1) % 2 == 0"]), ["f"], "")
    assert q.holds(4) == (True, "") and q.holds("%0999999999d")[0] is False
