"""Wrong solutions that try to game the verdict: every one must end `failed`, at both isolation levels.

The tests ask for `double(x) == 2 * x`; every trick below returns something else (or nothing) and
tries to pass anyway. The honest solution passes, so these tests can tell the difference.
"""

from __future__ import annotations

import os

import pytest

TESTS = "assert double(2) == 4\nassert double(5) == 10\nassert double(-3) == -6\n"
# The same three tests HumanEval-style: a helper the tests process runs (the parent cannot decide it).
CHECK = "def check(candidate):\n    for x in (2, 5, -3):\n        assert candidate(x) == 2 * x\n\n" \
        "check(double)\ncheck(double)\ncheck(double)\n"
FORMS = {"parent": TESTS, "tests process": CHECK}
HONEST = "def double(x):\n    return 2 * x\n"

# Code that looks everywhere the old harness exposed expected values: caller frames, gc, the
# builtins, linecache / inspect / __file__, other processes' command lines and open files.
SNOOP = r'''
import gc, os, re, sys

def _scan(text, x):
    m = re.search(r"double\(\s*%s\s*\)\s*==\s*(-?\d+)" % re.escape(repr(x)), text)
    return int(m.group(1)) if m else None

def double(x):
    texts = []
    f = sys._getframe(0)
    while f is not None:
        texts.append(repr(f.f_code.co_consts) + repr(f.f_locals) + repr(f.f_globals.get("_TESTS")))
        f = f.f_back
    for o in gc.get_objects():
        if isinstance(o, str) and "double(" in o:
            texts.append(o)
        elif type(o).__name__ == "code":
            texts.append(repr(o.co_consts))
    try:
        import inspect, linecache
        for fr in inspect.stack():
            texts.append("".join(fr.code_context or []))
        for name in list(linecache.cache):
            texts.append("".join(linecache.getlines(name)))
    except Exception:
        pass
    for path in [globals().get("__file__", ""), "tests.py", "program.py", "/scratch/tests.py"]:
        try:
            texts.append(open(path).read())
        except Exception:
            pass
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            for part in ("cmdline", "environ"):
                try:
                    texts.append(open(f"/proc/{pid}/{part}", "rb").read().decode("utf-8", "replace"))
                except Exception:
                    pass
            try:
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    texts.append(open(f"/proc/{pid}/fd/{fd}", "rb").read(65536).decode("utf-8", "replace"))
            except Exception:
                pass
    for t in texts:
        v = _scan(t, x)
        if v is not None:
            return v
    return -1
'''

TRICKS = {
    "equals_everything": "class Any:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n"
                         "def double(x):\n    return Any()\n",
    "int_subclass": "class I(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
                    "def double(x):\n    return I(0)\n",
    "str_subclass_in_list": "class S(str):\n    def __eq__(self, o):\n        return True\n"
                            "def double(x):\n    return [S('x')]\n",
    "exit0_in_call": "import os\ndef double(x):\n    os._exit(0)\n",
    "sys_exit0_in_call": "import sys\ndef double(x):\n    sys.exit(0)\n",
    "exit0_at_import": "import os\nos._exit(0)\ndef double(x):\n    return 0\n",
    "exit0_at_exit": "import atexit, os\n"
                     "atexit.register(lambda: (os.write(1, b'{\"op\": \"done\"}\\n'), os._exit(0)))\n"
                     "def double(x):\n    raise SystemExit(0)\n",
    "fake_lines_every_fd": r'''
import json, os, sys
def double(x):
    frame, nonce = sys._getframe(), ""   # the run's nonce: a local of the frame that calls us
    while frame is not None and not nonce:
        nonce = frame.f_locals.get("nonce") if isinstance(frame.f_locals.get("nonce"), str) else ""
        frame = frame.f_back
    fakes = [{"n": nonce, "k": k, "ok": True, "v": ["b", True]} for k in range(1, 20)]
    fakes += [{"op": "test", "n": nonce, "i": i, "ok": True, "e": None} for i in range(5)] + [{"op": "done"}]
    data = "".join(json.dumps(f) + "\n" for f in fakes).encode()
    data += b"__cidermill_test_results__{\"results\": [1, 1, 1], \"errors\": []}\n"
    for fd in range(64):
        try:
            os.write(fd, data)
        except OSError:
            pass
    print(data.decode())
    return True
''',
    "flood_stdout": "import os\ndef double(x):\n    while True:\n        os.write(1, b'x' * 65536)\n",
    "flood_protocol_fd": "import os\ndef double(x):\n    for fd in range(3, 8):\n        try:\n"
                         "            os.write(fd, b'[' * 300000)\n        except OSError:\n            pass\n"
                         "    return 0\n",
    "patch_builtins": "import builtins\nbuiltins.AssertionError = type('Nope', (Exception,), {})\n"
                      "builtins.all = lambda *a: True\nbuiltins.isinstance = lambda *a: True\n"
                      "def double(x):\n    return None\n",
    "rewrite_caller_frame": "import sys\ndef double(x):\n    f = sys._getframe(1)\n"
                            "    f.f_globals['double'] = lambda x: 2 * x\n    f.f_globals['__builtins__'] = {}\n"
                            "    return 0\n",
    "snoop_expected_values": SNOOP,
    "signal_the_parent": "import os, signal\ndef double(x):\n    for sig in (signal.SIGKILL, signal.SIGSTOP):\n"
                         "        for pid in [os.getppid(), 1, -1] + list(range(2, 200)):\n            try:\n"
                         "                os.kill(pid, sig)\n            except OSError:\n                pass\n"
                         "    return 0\n",
    "nan_identity": "N = [float('nan')]\ndef double(x):\n    return N\n",
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_honest_solution_passes(box, form):
    j = box.judge(HONEST, FORMS[form], timeout_s=3)
    assert (j.verdict, j.n_passed, j.n_tests, j.isolation, j.decided_by) == ("passed", 3, 3, box.level, form)


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("name", sorted(TRICKS))
def test_trick_ends_failed(box, name, form):
    j = box.judge(TRICKS[name], FORMS[form], timeout_s=3)
    assert j.decided_by == form
    assert j.verdict == "failed" and j.n_passed == 0, (name, j.tests)
    assert all(t.reason for t in j.tests), j.tests   # every failure says why
    # The judge (and this process) survive, and the next judgement is sound.
    assert box.judge(HONEST, FORMS[form], timeout_s=3).passed


def test_nan_identity_would_pass_in_process_but_not_here(box):
    # In one process `N == N` is True by identity although N holds a NaN; values that crossed the
    # boundary are fresh objects, so the comparison is CPython's on plain values: NaN equals nothing.
    assert eval("N == N", {"N": [float("nan")]})
    j = box.judge(TRICKS["nan_identity"], "assert double(0) == double(0)\n", timeout_s=3)
    assert j.verdict == "failed"


@pytest.mark.parametrize("form", sorted(FORMS))
def test_reasons_name_what_happened(box, form):
    by = {name: box.judge(TRICKS[name], FORMS[form], timeout_s=3) for name in
          ("equals_everything", "exit0_at_import", "exit0_in_call", "flood_stdout")}
    assert "not plain built-in data" in by["equals_everything"].reason
    assert "failed to load" in by["exit0_at_import"].reason or "exit code 0" in by["exit0_at_import"].reason
    assert "exit code 0" in by["exit0_in_call"].reason
    assert "output_limit" in by["flood_stdout"].reason


def test_the_parent_is_unharmed():
    assert os.getpid() > 0   # runs after the signalling trick: this process is alive


@pytest.mark.parametrize("name", ["snoop_expected_values", "equals_everything", "exit0_at_import"])
def test_the_same_trick_wins_when_tests_share_its_process(box, name):
    # The tricks are real: run in one process with the tests (the old harness's design), each
    # "passes" -- that is what the judge's two processes prevent.
    r = box.run(TRICKS[name] + "\n" + TESTS)
    assert r.verdict.value == "passed", r
