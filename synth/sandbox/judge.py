"""Judge a candidate solution against tests so that the verdict cannot be gamed by the solution.

    from synth.sandbox import judge
    j = judge("def add(a, b):\\n    return a + b", ["assert add(1, 2) == 3", "assert add(0, 0) == 0"])
    j.verdict, j.n_passed, j.n_tests, j.isolation        # 'passed', 2, 2, 'bwrap'

The solution runs in a sandboxed *solution process* that answers calls ("add", [1, 2]) with values
in the strict encoding of wire.py. It never sees a test, an expected value or a verdict. Who decides:
- the parent, when every test is a plain `assert f(<literals>) <op> <literals>` (direct.py): it sends
  the calls and evaluates each assertion over the returned values itself;
- otherwise a sandboxed *tests process* where the solution never ran: the trusted prelude and the
  tests, with the entry points bound to stubs (names.py: no other name of the tests is the
  solution's); each stub call goes to the parent, which forwards it to the solution process, checks
  the answer's envelope (the per-run nonce, the call number) and hands the value on; the tests
  process decodes it strictly (wire.py) into fresh built-in values. `==`, `assert`, builtins,
  helpers and frames there are the real ones.
The parent never does unbounded work on what the solution sends: it decodes and checks a value
itself only within direct.py's budgets; a bigger one goes, with its assertion, to the tests process,
whose time limit then applies.
Anything else (a missing, malformed, forged, extra or late answer; a dead, silent or flooding
solution process) is that call's failure, hence that test's failure, with a reason; never an
exception here.

A test is one top-level `assert` or expression statement of `tests` (a string), or one string of
`tests` (a list). Other top-level statements (imports, helpers, constants) run before the tests,
in order, in the tests process.
"""

from __future__ import annotations

import ast
import secrets
import time
from dataclasses import asdict, dataclass, field

from . import direct, names
from .limits import SandboxLimits
from .process import Child
from .wire import TooLarge, WireError, decode, encode

# Exceptions a solution may raise across the boundary; the tests process re-raises them by name.
RAISABLE = {"ValueError", "TypeError", "KeyError", "IndexError", "ZeroDivisionError", "ArithmeticError",
            "OverflowError", "AttributeError", "NotImplementedError"}


@dataclass
class TestResult:
    index: int
    source: str
    passed: bool
    reason: str = ""          # why it failed ("AssertionError: ...", "the solution: timeout", ...)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Judgement:
    verdict: str                          # "passed" (every test passed) | "failed"
    n_tests: int
    n_passed: int
    tests: list[TestResult] = field(default_factory=list)
    isolation: str = ""                   # bwrap | unshare | rlimits (weak: no namespaces)
    memory_accounting: str = ""           # cgroup-v1 | cgroup-v2 | rlimit
    reason: str = ""                      # the first failure's reason, for one-line reports
    decided_by: str = ""                  # "parent" (direct.py) | "tests process" (the solution never ran there)
    solution_stderr: str = ""             # capped
    wall_seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.verdict == "passed"

    @property
    def results(self) -> list[int]:
        return [int(t.passed) for t in self.tests]

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("solution_stderr")
        return d


def shown(text: str, limit: int = 200) -> str:
    """Text that may come from the solution (a reason quotes its exception message), for people:
    one line, quoted and escaped like a Python string (newlines, carriage returns, terminal escapes,
    line separators and other non-printable characters), so it cannot start a line of its own,
    move the cursor, or pose as a verdict."""
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


def split_tests(tests: str | list[str]) -> list[tuple[str, str]]:
    """[(kind, source)] in order: kind "test" for a test, "setup" for anything else at top level.

    Raises ValueError (naming the test) when a test does not parse: tests are the caller's input."""
    if isinstance(tests, str):
        try:
            tree = names.parse_source(tests)
        except SyntaxError as exc:
            raise ValueError(f"tests do not parse: line {exc.lineno}: {exc.msg}") from None
        steps = []
        for node in tree.body:
            kind = "test" if isinstance(node, (ast.Assert, ast.Expr)) and not _is_docstring(node) else "setup"
            steps.append((kind, ast.get_source_segment(tests, node) or ast.unparse(node)))
        return steps
    steps = []
    for i, src in enumerate(tests):
        try:
            compile(src, f"test {i}", "exec")
        except SyntaxError as exc:
            raise ValueError(f"test {i} does not parse: {exc.msg}: {src[:80]!r}") from None
        steps.append(("test", src))
    return steps


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


class _Broker:
    """One judgement: the tests process drives, the parent relays calls to the solution process."""

    def __init__(self, pool, slot: int, solution: str, steps, prelude: str, stubs: list[str],
                 limits: SandboxLimits, per_test_seconds: float, *, modules: list[str] = (),
                 force_stubs: bool = False):
        self.modules, self.force_stubs = list(modules), force_stubs
        self.pool, self.slot, self.solution, self.limits = pool, slot, solution, limits
        self.steps, self.prelude, self.stubs, self.per_test = steps, prelude, stubs, per_test_seconds
        self.solver: Child | None = None
        self.solver_dead = ""            # why the last solution process ended (it is restarted)
        self.restarts = 0
        self.stderr = bytearray()

    def _start_solver(self) -> Child | str:
        return self.pool.solver(self.slot, self.limits, self.solution)

    def _stop_solver(self) -> None:
        if self.solver is not None:
            self.solver.close(grace=0.2)
            self.stderr += self.solver.stderr[: max(0, self.limits.max_output_bytes - len(self.stderr))]
            self.solver = None

    def call(self, k: int, fn: str, args, kwargs, deadline: float) -> dict:
        """Relay one call; the reply for the tests process ({"ok", "v" | "e", "t"})."""
        if self.solver is None:
            if self.restarts > len(self.steps) + 1:
                return {"ok": False, "e": f"the solution: {self.solver_dead} (not restarted again)",
                        "t": "SolutionError"}
            self.restarts += 1
            started = self._start_solver()
            if isinstance(started, str):
                return {"ok": False, "e": f"the solution could not start: {started}", "t": "SolutionError"}
            self.solver = started
        child = self.solver
        why = child.send({"k": k, "fn": fn, "a": args, "kw": kwargs}, deadline)
        reply = child.recv(deadline) if why is None else why
        if isinstance(reply, dict):
            try:
                return self._check_reply(reply, child.nonce, k)
            except WireError as exc:
                why = f"malformed answer: {exc}"
        else:
            why = reply
        # No usable answer: this call fails, and the next call gets a fresh solution process.
        if why == "timeout":
            why = f"no answer within the per-test time limit ({self.per_test:g}s)"
        child.kill(why)
        self.solver_dead = why if not child.memory_killed() else "memory limit"
        self._stop_solver()
        return {"ok": False, "e": f"the solution: {self.solver_dead}", "t": "SolutionError"}

    @staticmethod
    def _check_reply(reply: dict, nonce: str, k: int) -> dict:
        """The answer for the tests process: the value's tree as sent (the tests process decodes it
        strictly; decoding it here would let the solution choose the parent's work), or the error
        (re-raised there by name when it is a plain built-in exception)."""
        if reply.get("n") != nonce or reply.get("k") != k or type(reply.get("ok")) is not bool:
            raise WireError("an answer that does not belong to this call")
        if reply["ok"]:
            if set(reply) != {"n", "k", "ok", "v"} or type(reply["v"]) is not list:
                raise WireError("unexpected fields")
            return {"ok": True, "v": reply["v"]}
        kind, message = reply.get("t"), reply.get("e")   # strings, else nothing (never str() of a big tree)
        kind, message = kind[:60] if type(kind) is str else "", message[:300] if type(message) is str else ""
        if kind in RAISABLE:
            return {"ok": False, "e": message, "t": kind}
        return {"ok": False, "e": f"{kind}: {message}", "t": "SolutionError"}

    def run_direct(self, plans: list[direct.Plan]) -> list[TestResult]:
        """Every call sent at once to the solution process; each assertion decided here, or, for a
        value past the parent's budget (direct.py), in the tests process."""
        out: dict[int, TestResult] = {}
        deferred: dict[int, list] = {}   # test -> the value's tree, for the tests process
        pending = list(range(len(plans)))
        while pending:
            if self.solver is None:
                if self.restarts > len(plans) + 1:
                    break
                self.restarts += 1
                started = self._start_solver()
                if isinstance(started, str):
                    self.solver_dead = f"could not start: {started}"
                    break
                self.solver = started
            child, sent = self.solver, []
            for i in pending:
                p = plans[i]
                try:
                    req = {"k": i + 1, "fn": p.fn, "a": encode(p.args), "kw": encode(p.kwargs)}
                except WireError as exc:
                    out[i] = TestResult(i, p.source, False, f"cannot pass this argument to the solution: {exc}")
                    continue
                if child.send(req, time.monotonic() + self.per_test):
                    break   # the process is gone: the replies so far, then the first unsent test fails
                sent.append(i)
            pending = [i for i in pending if i not in out]
            for i in sent:
                reply = child.recv(time.monotonic() + self.per_test)
                try:
                    if isinstance(reply, str):
                        raise WireError(reply)
                    answer = self._check_reply(reply, child.nonce, i + 1)
                    if answer["ok"]:
                        ok, why = plans[i].holds(decode(answer["v"], max_nodes=direct.PARENT_NODES,
                                                        max_hashed=direct.PARENT_HASHED))
                    else:
                        ok, why = False, answer["e"] if answer["t"] == "SolutionError" else \
                            f"{answer['t']}: {answer['e']}"
                except TooLarge:
                    deferred[i] = answer["v"]
                    continue
                except WireError as exc:
                    why = str(exc)
                    why = f"no answer within the per-test time limit ({self.per_test:g}s)" if why == "timeout" else why
                    child.kill(why)
                    self.solver_dead = "memory limit" if child.memory_killed() else why
                    self._stop_solver()
                    out[i] = TestResult(i, plans[i].source, False, f"the solution: {self.solver_dead}")
                    break
                out[i] = TestResult(i, plans[i].source, ok, why)
            pending = [i for i in pending if i not in out and i not in deferred]
            if pending and self.solver is child:   # requests that were never sent: the process is gone
                why = child.killed_for or child.ended()
                child.kill(why)
                self.solver_dead = "memory limit" if child.memory_killed() else why
                self._stop_solver()
                out[pending[0]] = TestResult(pending[0], plans[pending[0]].source, False,
                                             f"the solution: {self.solver_dead}")
                pending = pending[1:]
        self._stop_solver()
        if deferred:
            out.update(self._check_in_sandbox(plans, deferred))
        why = f"the solution: {self.solver_dead or 'no answer'}"
        return [out.get(i) or TestResult(i, p.source, False, why) for i, p in enumerate(plans)]

    def _check_in_sandbox(self, plans: list[direct.Plan], deferred: dict[int, list]) -> dict[int, TestResult]:
        """The assertions whose values were too costly for the parent, checked by the tests process:
        each decodes its value (strictly, under the per-test time limit) and runs as real Python."""
        order = sorted(deferred)
        steps = [("test", plans[i].assertion(), n) for n, i in enumerate(order)]
        results, _ = self.run(steps, prelude=direct.EVALUATOR_PRELUDE, stubs=[], modules=[],
                              values=[deferred[i] for i in order])
        return {i: TestResult(i, plans[i].source, r.passed, r.reason) for i, r in zip(order, results)}

    def run(self, steps=None, *, prelude: str | None = None, stubs: list[str] | None = None,
            modules: list[str] | None = None, values: list | None = None) -> tuple[list[TestResult], str]:
        """The tests process runs `steps` (default: this judgement's), with stubs for the calls. A
        step (kind, source, n) first binds direct.VALUE to values[n], which follow the job line one
        per line (the fork server reads its job unbuffered; the forked process reads these buffered)."""
        values = values or []
        steps = self.steps if steps is None else steps
        stubs = self.stubs if stubs is None else stubs
        nonce = secrets.token_hex(16)
        # The tests process's alarm is a second later than a call's deadline, so a slow solution is
        # reported as such (the parent gives up on the call first) rather than as a slow test.
        job = {"nonce": nonce, "modules": self.modules if modules is None else modules,
               "prelude": self.prelude if prelude is None else prelude, "stubs": stubs,
               "force_stubs": self.force_stubs, "value_name": direct.VALUE, "n_values": len(values), "steps": steps,
               "per_test_seconds": self.per_test + 1.0}
        test_steps = [i for i, step in enumerate(steps) if step[0] == "test"]
        results: dict[int, TestResult] = {}
        if stubs:   # the solution process starts while the tests process loads
            started = self._start_solver()
            self.solver = None if isinstance(started, str) else started
            self.restarts = 1
        tester = self.pool.tests_server(self.slot, self.limits)
        if isinstance(tester, str):
            failure = f"the tests process could not start: {tester}"
        else:
            why = tester.send(job, time.monotonic() + 10)
            for value in values:
                why = why or tester.send({"v": value}, time.monotonic() + 10)
            failure = f"the tests process: {why}" if why else self._serve(tester, nonce, steps, results)
            if not failure:
                reaped = tester.recv(time.monotonic() + 5)
                if not (isinstance(reaped, dict) and reaped.get("op") == "reaped" and reaped.get("n") == nonce):
                    failure = "the tests process did not end cleanly"
            self.pool.release_tests_server(self.slot, tester, healthy=not failure)
        self._stop_solver()
        out = []
        for n, i in enumerate(test_steps):
            out.append(results.get(i) or TestResult(n, steps[i][1], False, failure or "no result"))
            out[-1].index = n
        return out, failure

    def _serve(self, tester: Child, nonce: str, steps: list, results: dict[int, TestResult]) -> str:
        grace = 3.0 + self.per_test   # the tests process's own alarm ends a test after per_test + 1
        deadline = time.monotonic() + grace + 3.0   # + start-up and the prelude
        while True:
            msg = tester.recv(deadline)
            if isinstance(msg, str):
                return f"the tests process: {msg}"
            if msg.get("n") != nonce:
                return "the tests process: a message without this run's nonce"
            op = msg.get("op")
            if op == "call":
                reply = self.call(msg.get("k"), str(msg.get("fn")), msg.get("a"), msg.get("kw"),
                                  min(deadline, time.monotonic() + self.per_test))
                reply["k"] = msg.get("k")
                why = tester.send(reply, deadline)
                if why:
                    return f"the tests process: {why}"
            elif op in ("test", "setup"):
                i = msg.get("i")
                if type(i) is not int or not 0 <= i < len(steps):
                    return "the tests process: a malformed result"
                if op == "test":
                    results[i] = TestResult(i, steps[i][1], msg.get("ok") is True, str(msg.get("e") or ""))
                deadline = time.monotonic() + grace
            elif op == "done":
                return ""
            elif op == "reaped":
                return f"the tests process ended early (status {msg.get('status')})"
            else:
                return "the tests process: a malformed message"


def run_judgement(pool, slot: int, solution: str, tests: str | list[str], *, prelude: str = "",
                  entry_points: list[str] | None = None, limits: SandboxLimits,
                  per_test_seconds: float, prefer_direct: bool = True) -> Judgement:
    start = time.monotonic()
    steps = split_tests(tests)
    try:
        names.parse_source(solution)
    except (SyntaxError, ValueError) as exc:   # nothing to run: every test fails, with the reason
        why = (f"the solution does not parse: {type(exc).__name__}: {getattr(exc, 'msg', exc)} "
               f"(line {getattr(exc, 'lineno', '?')})")
        results = [TestResult(n, src, False, why) for n, (_, src) in enumerate(s for s in steps if s[0] == "test")]
        return Judgement("failed", len(results), 0, results, isolation=pool.level,
                         memory_accounting=pool.memory_accounting, reason=why, wall_seconds=time.monotonic() - start)
    # The entry points are the task's, else the solution's callables among the tests' free names;
    # no other name of the tests can come from the solution (names.py).
    stubs = sorted(entry_points) if entry_points is not None else names.entry_points(solution, steps, prelude)
    broker = _Broker(pool, slot, solution, steps, prelude, stubs, limits, per_test_seconds,
                     modules=names.modules_for_tests(solution, steps, prelude, stubs),
                     force_stubs=entry_points is not None)
    plans = direct.plan(steps, stubs, prelude) if prefer_direct else None
    if plans is not None:
        results, decided_by = broker.run_direct(plans), "parent"
    else:
        (results, _), decided_by = broker.run(), "tests process"
    n_passed = sum(r.passed for r in results)
    first = next((r.reason for r in results if not r.passed), "")
    verdict = "passed" if results and n_passed == len(results) else "failed"
    if not results:
        first = "no tests"
    return Judgement(verdict, len(results), n_passed, results, isolation=pool.level,
                     memory_accounting=pool.memory_accounting, reason=first, decided_by=decided_by,
                     solution_stderr=bytes(broker.stderr).decode("utf-8", "replace"),
                     wall_seconds=time.monotonic() - start)
