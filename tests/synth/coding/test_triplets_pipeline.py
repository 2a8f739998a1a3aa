"""The coding-triplet pipeline end to end with a scripted backend: exact rows kept and dropped
(with reasons), candidates really executed in the sandbox, provenance and manifest written."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from manifests import Catalog
from synth.backends import ScriptedBackend
from synth.coding.pipeline import coding_stages, pass_rate_summary, run_stages, write_run
from synth.coding.topics import TOPICS, topics_table
from synth.generation.llm import register_backend

MBPP_COPY = ("Write a function to find the minimum cost path to reach (m, n) from (0, 0) for the given cost "
             "matrix cost[][] and a position (m, n) in cost[][].")

QUESTIONS = {
    "reverse_string": "Given a string s, return it reversed, e.g. reverse_string('abc') returns 'cba'.",
    "is_palindrome": "Given a string s, return True when it reads the same backwards, e.g. 'aba' is one.",
    # The model copies an MBPP task: decontamination must drop it.
    "count_vowels": MBPP_COPY,
    "sum_evens": "Return the sum of the even numbers in nums; for [1, 2, 4] that is 6.",
}
TESTS = {
    "reverse_string": "```python\nassert reverse_string('abc') == 'cba'\nassert reverse_string('') == ''\n"
                      "assert reverse_string('ab') == 'ba'\n```",
    "is_palindrome": "```python\nassert is_palindrome('aba') == True\nassert is_palindrome('ab') == False\n```",
    "sum_evens": "```python\nassert sum_evens([1, 2, 4]) == 6\n```",    # one test only: too few
}
SOLUTIONS = {
    "reverse_string": ["```python\ndef reverse_string(s):\n    return s\n```",                 # passes 1 of 3
                       "```python\ndef reverse_string(s):\n    return s[::-1]\n```",           # passes 3 of 3
                       "```python\ndef reverse_string(s:\n```",                              # syntax error
                       "```python\ndef reverse_string(s):\n    while True: pass\n```"],      # hangs
    "is_palindrome": ["```python\ndef is_palindrome(s):\n    return True\n```"] * 2,         # 1 of 2: below
    "sum_evens": ["```python\ndef sum_evens(nums):\n    return sum(n for n in nums if n % 2 == 0)\n```"] * 2,
}


def reply(req, i):
    content = req.messages[-1]["content"]
    name = next(n for n in QUESTIONS if f"`{n}(" in content)
    if req.template_id == "coding_question":
        # The second sample repeats the first: word for word, or nearly for reverse_string.
        return "Question: " + QUESTIONS[name] + (" Thanks!" if i == 1 and name == "reverse_string" else "")
    if req.template_id == "coding_tests":
        return TESTS.get(name, "no tests, sorry")
    return SOLUTIONS[name][i % len(SOLUTIONS[name])]


def test_pipeline_keeps_only_execution_validated_triplets(tmp_path):
    backend = ScriptedBackend(reply, model="scripted-coder", cache=str(tmp_path / "cache.sqlite"))
    register_backend("test-coder", backend)
    names = list(QUESTIONS)
    seeds = topics_table().filter(pa.compute.is_in(topics_table()["entry_point"], pa.array(names)))
    stages = coding_stages({"kind": "registered", "name": "test-coder"}, questions_per_topic=2, n_solutions=4,
                           min_pass_rate=1.0, workers=2)
    stages[-1] = type(stages[-1])({**stages[-1].config_dict(), "per_test_seconds": 0.5, "wall_seconds": 6.0})
    run = run_stages(seeds, stages)

    assert run.table.column("entry_point").to_pylist() == ["reverse_string"]
    row = run.table.to_pylist()[0]
    assert row["solution"] == "def reverse_string(s):\n    return s[::-1]"
    assert row["candidate_passes"] == [1, 3, 0, 0] and row["pass_rate"] == 1.0 and row["n_tests"] == 3
    assert row["gen_backend"] == "scripted" and row["gen_model"] == "scripted-coder"
    assert (row["gen_template_id"], row["gen_template_version"]) == ("coding_question", "v1")
    assert json.loads(row["solution_provenance"])["gen_template_id"] == "coding_solution"
    assert json.loads(json.loads(row["tests_provenance"])["gen_sampling"])["temperature"] == 0.2

    dropped = {s.name: dict(s.dropped) for s in run.stats if s.dropped}
    assert dropped == {
        "coding_question_dedup_v1": {"duplicate_near": 1, "duplicate_exact": 3},
        "coding_decontam_v1": {"contaminated:mbpp": 1},
        "coding_triplets_v1": {"below_threshold": 1, "too_few_tests": 1},
    }
    reasons = sorted((r["entry_point"], r["drop_reason"]) for t in run.rejects for r in t.to_pylist())
    assert reasons == [("count_vowels", "contaminated:mbpp"), ("count_vowels", "duplicate_exact"),
                       ("is_palindrome", "below_threshold"), ("is_palindrome", "duplicate_exact"),
                       ("reverse_string", "duplicate_near"), ("sum_evens", "duplicate_exact"),
                       ("sum_evens", "too_few_tests")]
    # each drop's evidence (issue 43): is_palindrome's `return True` passes 'aba' and fails 'ab'
    found = {(r["entry_point"], r["drop_reason"]): (r["id"], json.loads(r["drop_detail"]))
             for t in run.rejects for r in t.to_pylist()}
    pal = found[("is_palindrome", "below_threshold")][1]
    assert {k: v for k, v in pal.items() if k != "failure"} == {
        "best_passes": 1, "n_tests": 2, "pass_rate": 0.5, "min": 1.0, "verdict": "failed",
        "failed_test": "assert is_palindrome('ab') == False"}
    assert "AssertionError" in pal["failure"]
    assert found[("sum_evens", "too_few_tests")][1] == {"n_tests": 1, "min": 2}
    mbpp = found[("count_vowels", "contaminated:mbpp")][1]
    assert (mbpp["benchmark"], mbpp["item"], mbpp["n"]) == ("mbpp", "1", 10)
    assert all(w in MBPP_COPY.lower() for w in mbpp["ngram"].split()) and len(mbpp["ngram"].split()) == 10
    rid, dup = found[("sum_evens", "duplicate_exact")]
    assert set(dup) == {"kept_id"} and dup["kept_id"] != rid
    summary = pass_rate_summary(run)
    # reverse_string: 4 candidates, 3 judged (the syntax error is not parsed as a solution; the hang
    # fails each test by the per-test limit); is_palindrome: 4 candidates judged, each 1 of 2.
    assert summary["sandbox_verdicts"] == {"passed": 1, "failed": 6}
    assert summary["sandbox_isolation"] == [row["sandbox_isolation"]] and row["sandbox_isolation"] in ("bwrap", "unshare")
    assert summary["test_executions"] == 3 * 3 + 4 * 2 and summary["triplets_kept"] == 1
    assert summary["candidate_solutions"] == 12 and summary["valid_candidate_solutions"] == 11  # sum_evens: 4 + 4

    kept, rejects, _ = write_run(Catalog(str(tmp_path / "root")), run, stages=stages)
    assert kept.manifest.rows == 1 and rejects.manifest.rows == 7
    assert kept.manifest.extra["pass_rates"]["triplets_kept"] == 1
    assert [s["name"] for s in kept.manifest.pipeline.stages] == [
        "coding_questions_v1", "coding_question_dedup_v1", "coding_decontam_v1", "coding_triplets_v1"]

    # A rerun is served from the response cache: nothing is generated again.
    calls = backend.calls
    run_stages(seeds, stages)
    assert backend.calls == calls


def test_seventy_one_topics_with_distinct_entry_points():
    t = topics_table()
    assert t.num_rows == len(TOPICS) == 71
    assert len(set(t.column("entry_point").to_pylist())) == 71


HOSTILE = [
    "```python\nclass Any:\n    def __eq__(self, o):\n        return True\ndef reverse_string(s):\n    return Any()\n```",
    "```python\nimport os\ndef reverse_string(s):\n    os._exit(0)\n```",
    "```python\nimport os\ndef reverse_string(s):\n    for fd in range(20):\n        try:\n"
    "            os.write(fd, b'{\\\"ok\\\": true}\\n' + b'[' * 100000)\n        except OSError:\n            pass\n"
    "    return s\n```",
    "```python\ndef reverse_string(s):\n    return s[::-1]\n```",
]


def test_hostile_candidates_fail_with_reasons_and_never_fail_the_stage(tmp_path):
    def hostile_reply(req, i):
        if req.template_id == "coding_tests":
            return TESTS["reverse_string"]
        return HOSTILE[i % len(HOSTILE)]

    register_backend("test-hostile", ScriptedBackend(hostile_reply, model="scripted-hostile",
                                                     cache=str(tmp_path / "cache.sqlite")))
    seeds = topics_table().filter(pa.compute.equal(topics_table()["entry_point"], "reverse_string"))
    stage = coding_stages({"kind": "registered", "name": "test-hostile"}, n_solutions=4)[-1]
    stage = type(stage)({**stage.config_dict(), "per_test_seconds": 1.0})
    result = stage(seeds.append_column("question", pa.array(["Reverse s."] * seeds.num_rows)))
    [row] = result.table.to_pylist()
    assert row["candidate_passes"] == [0, 0, 0, 3] and row["solution"] == "def reverse_string(s):\n    return s[::-1]"
    assert result.stats.counters["sandbox_failed"] == 3 and result.stats.counters["sandbox_passed"] == 1


def test_weak_isolation_must_be_asked_for_and_is_on_every_row(tmp_path):
    def reply(req, i):
        return TESTS["reverse_string"] if req.template_id == "coding_tests" else HOSTILE[3]

    register_backend("test-weak", ScriptedBackend(reply, model="scripted-weak", cache=str(tmp_path / "c.sqlite")))
    stage = coding_stages({"kind": "registered", "name": "test-weak"}, n_solutions=1)[-1]
    with pytest.raises(Exception, match="allow_weak_isolation"):
        type(stage)({**stage.config_dict(), "isolation": "rlimits"})
    weak = type(stage)({**stage.config_dict(), "isolation": "rlimits", "allow_weak_isolation": True})
    seeds = topics_table().filter(pa.compute.equal(topics_table()["entry_point"], "reverse_string"))
    result = weak(seeds.append_column("question", pa.array(["Reverse s."] * seeds.num_rows)))
    assert result.table.column("sandbox_isolation").to_pylist() == ["rlimits"]
    assert result.stats.counters["sandbox_isolation_rlimits"] == 1
    assert weak.describe()["config"]["allow_weak_isolation"] is True
