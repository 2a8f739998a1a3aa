"""Judge a candidate solution against tests so that the verdict cannot be gamed by the solution.

    from synth.sandbox import judge
    j = judge("def add(a, b):\\n    return a + b", ["assert add(1, 2) == 3", "assert add(0, 0) == 0"])
    j.verdict, j.n_passed, j.n_tests, j.isolation        # 'passed', 2, 2, 'bwrap'

The solution runs in a sandboxed *solution process* that answers calls ("add", [1, 2]) with values
in the strict encoding of wire.py. It never sees a test, an expected value or a verdict. Who decides:
- the parent, when every test is a plain `assert f(<literals>) <op> <literals>` (direct.py): it sends
  the calls and evaluates each assertion over the returned values itself;
- otherwise a sandboxed *tests process* where the solution never ran: the trusted prelude and the
  tests, with the solution's names bound to stubs; each stub call goes to the parent, which forwards
  it to the solution process, checks the answer (the per-run nonce, the call number, the encoding)
  and hands back fresh built-in values. `==`, `assert`, helpers and frames there are the real ones.
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

from . import direct
from .limits import SandboxLimits
from .process import Child, spawn
from .wire import WireError, decode, encode

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


def split_tests(tests: str | list[str]) -> list[tuple[str, str]]:
    """[(kind, source)] in order: kind "test" for a test, "setup" for anything else at top level.

    Raises ValueError (naming the test) when a test does not parse: tests are the caller's input."""
    if isinstance(tests, str):
        try:
            tree = ast.parse(tests)
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


def solution_names(solution: str, steps: list[tuple[str, str]], prelude: str) -> list[str]:
    """The solution's callables (top-level def, class, `name = lambda/other name`) that the tests
    use and the prelude does not define: these become stubs in the tests process."""
    defined = _callables(_parse(solution))
    trusted = _callables(_parse(prelude)) | {n for _, n in _imports(_parse(prelude))}
    used = set()
    for _, src in steps:
        used |= {n.id for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Name)}
    return sorted((defined & used) - trusted)


def solution_imports(solution: str) -> str:
    """The solution's top-level import statements, for the tests process: tests often lean on the
    solution's `import math`. Only the standard library is importable in the sandbox, so this runs
    no code of the solution's."""
    tree = _parse(solution)
    return "\n".join(ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
                     and not (isinstance(node, ast.ImportFrom) and node.level))


def _parse(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return ast.Module(body=[], type_ignores=[])


def _callables(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.Lambda, ast.Name, ast.Attribute)):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _imports(tree: ast.Module):
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                yield node, (alias.asname or alias.name).split(".")[0]


class _Broker:
    """One judgement: the tests process drives, the parent relays calls to the solution process."""

    def __init__(self, pool, slot: int, solution: str, steps, prelude: str, stubs: list[str],
                 limits: SandboxLimits, per_test_seconds: float, imports: str = ""):
        self.imports = imports
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
        """The answer for the tests process: a value validated and re-encoded canonically, or the
        error (re-raised there by name when it is a plain built-in exception)."""
        if reply.get("n") != nonce or reply.get("k") != k or type(reply.get("ok")) is not bool:
            raise WireError("an answer that does not belong to this call")
        if reply["ok"]:
            if set(reply) != {"n", "k", "ok", "v"}:
                raise WireError("unexpected fields")
            return {"ok": True, "v": encode(decode(reply["v"]))}
        kind, message = str(reply.get("t", "")), str(reply.get("e", ""))[:300]
        if kind in RAISABLE:
            return {"ok": False, "e": message, "t": kind}
        return {"ok": False, "e": f"{kind[:60]}: {message}", "t": "SolutionError"}

    def run_direct(self, plans: list[direct.Plan]) -> list[TestResult]:
        """Every call sent at once to the solution process; each assertion decided here."""
        out: dict[int, TestResult] = {}
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
                except WireError as exc:
                    why = str(exc)
                    why = f"no answer within the per-test time limit ({self.per_test:g}s)" if why == "timeout" else why
                    child.kill(why)
                    self.solver_dead = "memory limit" if child.memory_killed() else why
                    self._stop_solver()
                    out[i] = TestResult(i, plans[i].source, False, f"the solution: {self.solver_dead}")
                    break
                if answer["ok"]:
                    ok, why = plans[i].holds(decode(answer["v"]))
                else:
                    ok, why = False, answer["e"] if answer["t"] == "SolutionError" else f"{answer['t']}: {answer['e']}"
                out[i] = TestResult(i, plans[i].source, ok, why)
            pending = [i for i in pending if i not in out]
            if pending and self.solver is child:   # requests that were never sent: the process is gone
                why = child.killed_for or child.ended()
                child.kill(why)
                self.solver_dead = "memory limit" if child.memory_killed() else why
                self._stop_solver()
                out[pending[0]] = TestResult(pending[0], plans[pending[0]].source, False,
                                             f"the solution: {self.solver_dead}")
                pending = pending[1:]
        self._stop_solver()
        why = f"the solution: {self.solver_dead or 'no answer'}"
        return [out.get(i) or TestResult(i, p.source, False, why) for i, p in enumerate(plans)]

    def run(self) -> tuple[list[TestResult], str]:
        nonce = secrets.token_hex(16)
        # The tests process's alarm is a second later than a call's deadline, so a slow solution is
        # reported as such (the parent gives up on the call first) rather than as a slow test.
        job = {"nonce": nonce, "imports": self.imports, "prelude": self.prelude, "stubs": self.stubs,
               "steps": self.steps,
               "per_test_seconds": self.per_test + 1.0}
        test_steps = [i for i, (kind, _) in enumerate(self.steps) if kind == "test"]
        results: dict[int, TestResult] = {}
        if self.stubs:   # the solution process starts while the tests process loads
            started = self._start_solver()
            self.solver = None if isinstance(started, str) else started
            self.restarts = 1
        tester = self.pool.tests_server(self.slot, self.limits)
        if isinstance(tester, str):
            failure = f"the tests process could not start: {tester}"
        else:
            why = tester.send(job, time.monotonic() + 10)
            failure = f"the tests process: {why}" if why else self._serve(tester, nonce, results)
            if not failure:
                reaped = tester.recv(time.monotonic() + 5)
                if not (isinstance(reaped, dict) and reaped.get("op") == "reaped" and reaped.get("n") == nonce):
                    failure = "the tests process did not end cleanly"
            self.pool.release_tests_server(self.slot, tester, healthy=not failure)
        self._stop_solver()
        out = []
        for n, i in enumerate(test_steps):
            out.append(results.get(i) or TestResult(n, self.steps[i][1], False, failure or "no result"))
            out[-1].index = n
        return out, failure

    def _serve(self, tester: Child, nonce: str, results: dict[int, TestResult]) -> str:
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
                if type(i) is not int or not 0 <= i < len(self.steps):
                    return "the tests process: a malformed result"
                if op == "test":
                    results[i] = TestResult(i, self.steps[i][1], msg.get("ok") is True, str(msg.get("e") or ""))
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
        ast.parse(solution)
    except (SyntaxError, ValueError) as exc:   # nothing to run: every test fails, with the reason
        why = (f"the solution does not parse: {type(exc).__name__}: {getattr(exc, 'msg', exc)} "
               f"(line {getattr(exc, 'lineno', '?')})")
        results = [TestResult(n, src, False, why) for n, (_, src) in enumerate(s for s in steps if s[0] == "test")]
        return Judgement("failed", len(results), 0, results, isolation=pool.level,
                         memory_accounting=pool.memory_accounting, reason=why, wall_seconds=time.monotonic() - start)
    stubs = sorted(entry_points) if entry_points is not None else solution_names(solution, steps, prelude)
    broker = _Broker(pool, slot, solution, steps, prelude, stubs, limits, per_test_seconds,
                     imports=solution_imports(solution))
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
