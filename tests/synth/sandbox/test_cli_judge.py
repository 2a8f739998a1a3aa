"""`cidermill synth judge` and `cidermill synth sandbox-check`: the same judge path as the stage."""

from __future__ import annotations

import gzip
import json

from manifests.main import main

TESTS = "import math\nassert add(1, 2) == 3\nassert add(2, 2) == 4\nassert math.isclose(add(0.1, 0.2), 0.3)\n"


def test_judge_json_last_line(tmp_path, capsys):
    (tmp_path / "tests.py").write_text(TESTS)
    (tmp_path / "good.py").write_text("def add(a, b):\n    return a + b\n")
    (tmp_path / "bad.py").write_text("class A:\n    def __eq__(self, o):\n        return True\n"
                                     "def add(a, b):\n    return A() if a == 1 else a + b\n")
    assert main(["synth", "judge", "--solution", str(tmp_path / "good.py"), "--tests", str(tmp_path / "tests.py"),
                 "--json"]) == 0
    good = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (good["verdict"], good["n_tests"], good["n_passed"]) == ("passed", 3, 3)
    assert good["isolation"] in ("bwrap", "unshare") and [t["passed"] for t in good["tests"]] == [True] * 3
    assert good["decided_by"] == "tests process"   # `import math` is set-up: the parent cannot decide alone
    assert main(["synth", "judge", "--solution", str(tmp_path / "bad.py"), "--tests", str(tmp_path / "tests.py"),
                 "--json", "--timeout", "2"]) == 1
    bad = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (bad["verdict"], bad["n_passed"]) == ("failed", 2)
    assert "not plain built-in data" in bad["tests"][0]["reason"]


def test_judge_bad_input_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "tests.py").write_text("assert add(1, 2) == 3\nassert add(\n")
    (tmp_path / "sol.py").write_text("def add(a, b):\n    return a + b\n")
    assert main(["synth", "judge", "--solution", str(tmp_path / "sol.py"), "--tests", str(tmp_path / "tests.py")]) == 2
    assert "tests.py: tests do not parse: line 2" in capsys.readouterr().out
    assert main(["synth", "judge", "--solution", str(tmp_path / "missing.py"), "--tests", str(tmp_path / "tests.py")]) == 2
    assert "--solution" in capsys.readouterr().out


def test_sandbox_check_on_a_small_humaneval_file(tmp_path, capsys):
    items = [{"task_id": "T/0", "prompt": "def inc(x):\n    \"\"\"x + 1\"\"\"\n", "canonical_solution": "    return x + 1\n",
              "test": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(-1) == 0\n",
              "entry_point": "inc"},
             {"task_id": "T/1", "prompt": "def neg(b):\n", "canonical_solution": "    return not b\n",
              "test": "def check(candidate):\n    assert candidate(True) is False\n", "entry_point": "neg"}]
    path = tmp_path / "HumanEval.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write("".join(json.dumps(it) + "\n" for it in items))
    assert main(["synth", "sandbox-check", "--data", str(path)]) == 0
    out = capsys.readouterr().out
    assert "canonical {'passed': 2}" in out and "mutated   {'failed': 2}" in out
