"""A pool of sandbox slots: judge solutions against tests, or run whole programs.

    with Sandbox(SandboxLimits(cpu_seconds=2), max_workers=2) as sb:
        j = sb.judge(solution, tests)                 # a Judgement (see judge.py): the trusted path
        r = sb.run("print(1)")                        # a SandboxResult: a program's outcome only

Each slot has its own unprivileged uids, drawn at random per Sandbox (see SUBS: one per kind of
process), so RLIMIT_NPROC bounds a fork bomb per slot and kind, and, where the machine allows, its
own memory cgroups. Each slot keeps a tests fork server and, at the namespace levels, a solution
zygote that forks each solution process (zygote.py); at the weak level a pre-started process.
`isolation_level="auto"` picks bubblewrap, else the namespace level; without either it refuses
unless `allow_weak_isolation=True` (then the level is "rlimits" and every result says so).

`run` is for programs whose only outcome is how their process ended (the escape probes, the
overhead baseline): a program can fake its own exit status, so it is never a test verdict.
"""

from __future__ import annotations

import os
import queue
import re
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from . import isolation, levels
from .judge import Judgement, run_judgement
from .limits import SandboxLimits, SandboxResult, Verdict
from .process import spawn
from .zygote import Zygote

SUBS = {"solution": 0, "tests": 1, "solution-next": 2, "program": 3}   # per slot: own uid and cgroup each
SERVER_JOBS = 500                # a tests server is replaced after this many judgements
UID_RANGE = (1 << 20, 1 << 30)   # no accounts needed; a random base per Sandbox keeps concurrent sandboxes apart


class Sandbox:
    def __init__(self, limits: SandboxLimits | None = None, *, isolation_level: str = "auto",
                 allow_weak_isolation: bool = False, max_workers: int = 2):
        self.limits = limits or SandboxLimits()
        self.level = levels.choose(isolation_level, allow_weak_isolation=allow_weak_isolation)
        self.weak = self.level not in isolation.STRONG
        self.max_workers = max_workers
        self.base_uid = UID_RANGE[0] + secrets.randbelow((UID_RANGE[1] - UID_RANGE[0]) // 4096) * 4096
        self._slots: queue.Queue[int] = queue.Queue()
        tag = f"cidermill-sandbox-{os.getpid()}-{secrets.token_hex(3)}"
        self._cgroups = {}
        self._servers = {}   # slot -> the tests fork server (child.py serve_tests_forever)
        self._warm = {}      # slot -> a started solution process waiting for its solution (weak level)
        self._zygotes = {}   # slot -> its solution zygote (namespace levels)
        for slot in range(max_workers):
            self._slots.put(slot)
            for sub in SUBS.values():
                self._cgroups[slot, sub] = isolation.MemoryCgroup.create(f"{tag}-{slot}-{sub}",
                                                                         self.limits.memory_bytes)
        cg = next(iter(self._cgroups.values()), None)
        self.memory_accounting = f"cgroup-{cg.version}" if cg else "rlimit"

    def close(self) -> None:
        for child in [*self._servers.values(), *self._warm.values(), *self._zygotes.values()]:
            child.close(grace=0.5)
        self._servers, self._warm, self._zygotes = {}, {}, {}
        for cg in self._cgroups.values():
            if cg is not None:
                cg.close()
        self._cgroups = {}

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def describe(self) -> dict:
        from .process import SECCOMP
        return {"isolation": self.level, "weak_isolation": self.weak, "memory_accounting": self.memory_accounting,
                "seccomp": "x86_64 deny list" if SECCOMP else "none",
                "solution_processes": "pre-started" if self.weak else "forked by a per-slot zygote"}

    # -- used by judge.py ------------------------------------------------------------------------

    def spawn_child(self, role: str, job: dict | None, limits: SandboxLimits, slot: int, sub: int, nonce: str, *,
                    die_with_parent: bool = True, control_fd: int | None = None):
        cg = self._cgroups.get((slot, sub))
        if cg is not None and cg.limit != limits.memory_bytes:
            cg.set_limit(limits.memory_bytes)
        child = spawn(self.level, role, job, limits, uid=self.uid(slot, sub), nonce=nonce, cgroup=cg,
                      die_with_parent=die_with_parent, control_fd=control_fd)
        if not isinstance(child, str):
            child.sub = sub
        return child

    def solver(self, slot: int, limits: SandboxLimits, source: str):
        """A fresh solution process running `source`: forked by the slot's zygote at the namespace
        levels; at the weak level (no pid namespace to empty) the slot's pre-started one when it is alive
        (nothing has run in it yet; it was waiting for its first line), else a new one. Then the
        next one is started, so its start-up overlaps this judgement instead of delaying the next."""
        if not self.weak:
            return self._forked_solver(slot, limits, source)
        child = self._warm.pop(slot, None)
        if child is not None:
            if child.limits == limits and child.proc.poll() is None and not child.killed_for and \
                    child.send({"source": source}, time.monotonic() + 5) is None:
                sub = child.sub
            else:
                child.kill("stale")
                child.close(grace=0.1)
                child = None
        if child is None:
            sub = SUBS["solution"]
            child = self.spawn_child("solution", {"source": source}, limits, slot, sub, secrets.token_hex(16))
        # Not tied to this thread (bwrap's parent-death signal follows the thread): it waits on its
        # first line, and exits on EOF if this process goes away.
        other = SUBS["solution-next"] if sub == SUBS["solution"] else SUBS["solution"]
        warm = self.spawn_child("solution", None, limits, slot, other, secrets.token_hex(16), die_with_parent=False)
        if not isinstance(warm, str):
            self._warm[slot] = warm
        return child

    def _forked_solver(self, slot: int, limits: SandboxLimits, source: str):
        """Forked by the slot's zygote, started (again) when missing, dead, broken or stale. A fork
        that fails before the item could read its source is the zygote's failure: retried once on a
        fresh zygote, never counted against the solution."""
        why = ""
        for _ in range(2):
            zygote = self._zygotes.get(slot)
            if zygote is None or not zygote.usable(limits):
                if zygote is not None:
                    zygote.close()
                zygote = self._zygotes[slot] = Zygote(
                    lambda fd: self.spawn_child("zygote", None, limits, slot, SUBS["solution"], "",
                                                die_with_parent=False, control_fd=fd), limits)
                if zygote.broken:
                    return zygote.broken
            child = zygote.fork(secrets.token_hex(16))
            if isinstance(child, str):
                why = child
                continue
            why = child.send({"source": source}, time.monotonic() + 5)
            if why is None:
                return child
            child.kill(why)
            child.close(grace=0.1)
            zygote.fail(f"an item could not start: {why}")
        return f"the solution process could not be forked: {why}"

    def uid(self, slot: int, sub: int) -> int:
        """The slot's uid for one kind of process (SUBS): solution processes alternate between two,
        so a pre-started one never shares a uid or cgroup with the one at work."""
        return self.base_uid + 4 * slot + sub

    def tests_server(self, slot: int, limits: SandboxLimits):
        """This slot's tests fork server, started when missing or when its limits changed."""
        child = self._servers.pop(slot, None)
        if child is not None and child.limits != limits:
            child.close(grace=0.2)
            child = None
        if child is None:
            # Shared by judgements on any thread: not tied to this one (see `solver`).
            child = self.spawn_child("tests", {}, limits, slot, SUBS["tests"], "", die_with_parent=False)
        return child

    def release_tests_server(self, slot: int, child, *, healthy: bool) -> None:
        child.jobs = getattr(child, "jobs", 0) + 1
        if healthy and not child.killed_for and child.proc.poll() is None and child.jobs < SERVER_JOBS:
            self._servers[slot] = child
        else:
            child.kill("not reused")
            child.close(grace=0.2)

    def _slot(self):
        return _SlotLease(self._slots)

    # -- the two entry points --------------------------------------------------------------------

    def judge(self, solution: str, tests: str | list[str], *, prelude: str = "",
              entry_points: list[str] | None = None, timeout_s: float = 2.0,
              limits: SandboxLimits | None = None, prefer_direct: bool = True) -> Judgement:
        """Run `solution` against `tests` (see judge.py); never raises for anything the solution does.
        `timeout_s` is per test; `prelude` is trusted code the tests may use (HumanEval's prompt);
        `prefer_direct=False` sends even simple asserts through the tests process."""
        with self._slot() as slot:
            return run_judgement(self, slot, solution, tests, prelude=prelude, entry_points=entry_points,
                                 limits=limits or self.limits, per_test_seconds=timeout_s,
                                 prefer_direct=prefer_direct)

    def judge_many(self, jobs: Sequence[dict]) -> list[Judgement]:
        """`jobs`: keyword dicts for `judge`; results in order, `max_workers` at a time."""
        if not jobs:
            return []
        with ThreadPoolExecutor(self.max_workers) as pool:
            return list(pool.map(lambda kw: self.judge(**kw), jobs))

    def run(self, program: str, *, limits: SandboxLimits | None = None) -> SandboxResult:
        limits = limits or self.limits
        with self._slot() as slot:
            start = time.monotonic()
            child = self.spawn_child("program", {"source": program}, limits, slot, SUBS["program"], "")
            if isinstance(child, str):
                return SandboxResult(Verdict.CRASHED, reason=child, isolation=self.level)
            child.drain(start + limits.wall_seconds)
            stdout = bytes(child._buf)
            code = child.close(grace=0.5)
            res = SandboxResult(Verdict.CRASHED, stdout=stdout.decode("utf-8", "replace"),
                                stderr=bytes(child.stderr).decode("utf-8", "replace"),
                                stdout_bytes=child.stdout_total, stderr_bytes=child.stderr_total, exit_code=code,
                                wall_seconds=time.monotonic() - start, isolation=self.level)
            _decide(res, child)
            return res


_TRACEBACK_SCAFFOLD = re.compile(r"\s|Traceback \(most recent call last\)|During handling of the above exception|"
                                r"The above exception was the direct cause")


def failure_line(stderr: str) -> str:
    """The line that says why a run failed: its last complete line that is not traceback scaffolding (a frame,
    its source line, `Traceback (most recent call last):`), else whatever is last. Processes the solution
    forked write to the same pipe, so the last bytes read can be a fragment of another process's line or
    traceback (a fork bomb's reason was once `Blo`)."""
    lines = stderr.splitlines(keepends=True)
    for line in reversed(lines):
        if line.endswith("\n") and line.strip() and not _TRACEBACK_SCAFFOLD.match(line):
            return line.strip()
    return stderr.strip().splitlines()[-1] if stderr.strip() else ""


def _decide(res: SandboxResult, child) -> None:
    code = res.exit_code
    last = failure_line(res.stderr)
    if child.killed_for == "wall":
        res.verdict, res.reason = Verdict.TIMEOUT, f"wall clock over {res.wall_seconds:.1f}s"
    elif child.killed_for == "output_limit":
        res.verdict, res.reason, res.blocked_events = Verdict.BLOCKED, "output_limit", ["output_limit"]
    elif child.memory_killed() or code == 3:
        res.verdict, res.reason = Verdict.MEMORY, "memory limit"
    elif code == 0:
        res.verdict = Verdict.PASSED
    elif code in (-24, 128 + 24, -9, 128 + 9):   # SIGXCPU, or SIGKILL at the hard CPU limit
        res.verdict, res.reason = Verdict.TIMEOUT, "cpu limit (killed)"
    elif code is not None and (code < 0 or code > 128):
        res.verdict, res.reason = Verdict.CRASHED, f"killed by signal {abs(code) % 128}"
    else:
        res.verdict, res.reason = Verdict.FAILED, last[:300] or f"exit code {code}"


class _SlotLease:
    def __init__(self, slots: queue.Queue):
        self.slots = slots

    def __enter__(self) -> int:
        self.slot = self.slots.get()
        return self.slot

    def __exit__(self, *exc) -> None:
        self.slots.put(self.slot)


def judge(solution: str, tests: str | list[str], *, prelude: str = "", entry_points: list[str] | None = None,
          timeout_s: float = 2.0, limits: SandboxLimits | None = None, isolation_level: str = "auto",
          allow_weak_isolation: bool = False) -> Judgement:
    """One judgement with a sandbox of its own (see `Sandbox.judge`; use a Sandbox for many)."""
    with Sandbox(limits, isolation_level=isolation_level, allow_weak_isolation=allow_weak_isolation,
                 max_workers=1) as sb:
        return sb.judge(solution, tests, prelude=prelude, entry_points=entry_points, timeout_s=timeout_s)
