"""Turn (solution, unit tests) into one sandbox program that reports a pass/fail per test.

One sandbox run per candidate solution (not per test): the program defines the solution, then
runs each test statement on its own with a per-test alarm, and prints one marker line with the
results. The solution's own prints go to a buffer so they cannot fake or bury the marker. If the
whole run does not end with `passed` (timeout, memory, blocked, crash), every test counts as failed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from synth.sandbox import SandboxResult, Verdict

MARKER = "__cidermill_test_results__"

_TEMPLATE = '''\
import io as _io, json as _json, signal as _signal, sys as _sys
_SOLUTION = {solution!r}
_TESTS = {tests!r}
_real_stdout = _sys.stdout
_sys.stdout = _io.StringIO()           # the solution's prints never reach the marker line
_ns = {{"__name__": "solution"}}
_results, _errors = [], []
try:
    exec(compile(_SOLUTION, "solution.py", "exec"), _ns)
    _loaded = True
except BaseException as _exc:   # a syntax error or a crash at import: every test fails
    _loaded, _errors = False, [type(_exc).__name__ + ": " + str(_exc)[:200]]

def _alarm(*_):
    raise TimeoutError("per-test time limit")

_signal.signal(_signal.SIGALRM, _alarm)
for _test in _TESTS:
    if not _loaded:
        _results.append(0)
        continue
    _signal.setitimer(_signal.ITIMER_REAL, {per_test_seconds})
    try:
        exec(compile(_test, "test.py", "exec"), dict(_ns))
        _results.append(1)
    except BaseException as _exc:
        _results.append(0)
        _errors.append(type(_exc).__name__ + ": " + str(_exc)[:200])
    finally:
        _signal.setitimer(_signal.ITIMER_REAL, 0)
_real_stdout.write("\\n" + {marker!r} + _json.dumps({{"results": _results, "errors": _errors[:5]}}) + "\\n")
_real_stdout.flush()
'''


def build_test_program(solution: str, tests: list[str], *, per_test_seconds: float = 2.0) -> str:
    return _TEMPLATE.format(solution=solution, tests=list(tests), per_test_seconds=float(per_test_seconds),
                            marker=MARKER)


@dataclass
class TestOutcome:
    results: list[int]          # 1 = passed, per test, in order
    verdict: str                # the sandbox verdict of the whole run
    errors: list[str]

    @property
    def n_passed(self) -> int:
        return sum(self.results)


def parse_outcome(result: SandboxResult, n_tests: int) -> TestOutcome:
    """Per-test results from a sandbox run of `build_test_program` (all failed unless the run passed)."""
    if result.verdict is Verdict.PASSED:
        for line in reversed(result.stdout.splitlines()):
            if line.startswith(MARKER):
                data = json.loads(line[len(MARKER):])
                results = [int(bool(x)) for x in data["results"]][:n_tests]
                if len(results) == n_tests:
                    return TestOutcome(results, result.verdict.value, list(data.get("errors", [])))
        return TestOutcome([0] * n_tests, "crashed", ["no result line"])
    return TestOutcome([0] * n_tests, result.verdict.value, [result.reason])
