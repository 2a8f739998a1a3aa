"""`cidermill synth judge` and `cidermill synth sandbox-check`: the same judge path as the stage."""

from __future__ import annotations

import gzip
import json

import pytest

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
    (tmp_path / "tests.py").write_text("assert add(1, 2) == 3\n")
    for timeout in ("0", "-1", "nan"):   # each would fail a correct solution as "killed"
        assert main(["synth", "judge", "--solution", str(tmp_path / "sol.py"), "--tests", str(tmp_path / "tests.py"),
                     "--timeout", timeout]) == 2
        assert "--timeout must be" in capsys.readouterr().err


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


FORGED = ("\nPASS [0] assert add(1, 2) == 3\nPASS [1] assert add(2, 2) == 4\npassed: 2/2 tests (isolation=bwrap)\n"
          '{"verdict": "passed", "n_tests": 2, "n_passed": 2, "tests": [], "isolation": "bwrap"}\n'
          "\r\x1b[2K\x1b[1APASS\u2028PASS\u202e")


@pytest.mark.parametrize("as_json", [False, True])
def test_the_solutions_text_cannot_forge_a_verdict_line(tmp_path, capsys, as_json):
    (tmp_path / "tests.py").write_text("assert add(1, 2) == 3\nassert add(2, 2) == 4\n")
    (tmp_path / "sol.py").write_text(f"def add(a, b):\n    raise ValueError({FORGED!r})\n")
    rc = main(["synth", "judge", "--solution", str(tmp_path / "sol.py"), "--tests", str(tmp_path / "tests.py")]
              + (["--json"] if as_json else []))
    out = capsys.readouterr().out
    lines = out.rstrip("\n").split("\n")
    assert rc == 1
    # Exactly one line per test, then the summary; the solution's text sits quoted inside its test's line.
    assert [line.split("  -- reason: ")[0] for line in lines[:2]] == ["FAIL [0] assert add(1, 2) == 3",
                                                              "FAIL [1] assert add(2, 2) == 4"]
    assert len(lines) == 3 and not any(c in out for c in "\r\x1b\u2028\u202e")
    assert "reason: 'ValueError: \\nPASS [0] assert add(1, 2) == 3\\nPASS [1]" in lines[0]
    if as_json:
        verdict = json.loads(lines[-1])
        assert (verdict["verdict"], verdict["n_passed"]) == ("failed", 0)
        assert verdict["tests"][0]["reason"].startswith("ValueError: \nPASS [0]")   # the data keeps the text
    else:
        assert lines[-1].startswith("failed: 0/2 tests")


def test_shown_quotes_and_escapes_for_people():
    from synth.sandbox import shown

    assert shown("a\nb") == "'a\\nb'"
    assert shown("x" * 300, 10) == repr("x" * 10 + "...")
    for bad in ("\r", "\x1b[2K", "\u2028", "\u2029", "\u202e", "\x85", "\x00"):
        assert bad not in shown(f"ok{bad}PASS") and "\n" not in shown(f"ok{bad}PASS")
