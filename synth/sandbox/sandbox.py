"""Run untrusted Python in a separate, locked-down process and say how it ended.

    sandbox = Sandbox(SandboxLimits(cpu_seconds=2, wall_seconds=5), max_workers=2)
    result = sandbox.run("assert sum([1, 2]) == 3\\nprint('ok')")
    result.verdict, result.reason, result.stdout       # Verdict.PASSED, '', 'ok\\n'

Each run gets a fresh scratch directory (the only writable place), a scrubbed environment, the
rlimits of `SandboxLimits`, no network, and (when run as root) its own unprivileged uid per
worker slot, so RLIMIT_NPROC bounds a fork bomb per slot and a straggler can be killed by uid.
Nothing the program does raises here: every outcome is a `SandboxResult` with a verdict.
"""

from __future__ import annotations

import json
import os
import queue
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from . import isolation
from .limits import SandboxLimits, SandboxResult, Verdict

RUNNER = Path(__file__).with_name("runner.py")
BASE_UID = 61000     # sandbox uids are BASE_UID + slot; no account needs to exist for them
EXTRA_PROCS = 4      # bwrap's own processes count against the uid's RLIMIT_NPROC too


class Sandbox:
    def __init__(self, limits: SandboxLimits | None = None, *, isolation_level: str = "auto",
                 max_workers: int = 2, python: str | None = None, base_dir: str | None = None):
        self.limits = limits or SandboxLimits()
        self.level = isolation.choose(isolation_level)
        self.python = python or isolation.sandbox_python()
        self.as_root = os.geteuid() == 0
        self.base = Path(tempfile.mkdtemp(prefix="cidermill-sandbox-", dir=base_dir))
        os.chmod(self.base, 0o711)   # sandbox uids may traverse, not list
        self._slots: queue.Queue[int] = queue.Queue()
        for slot in range(max_workers):
            self._slots.put(slot)
        self.max_workers = max_workers

    def close(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- one run ---------------------------------------------------------------------------------

    def run(self, program: str, *, files: dict[str, str] | None = None,
            limits: SandboxLimits | None = None) -> SandboxResult:
        """Run `program` (Python source) with `files` (name -> text) beside it in scratch."""
        slot = self._slots.get()
        try:
            return self._run(program, files or {}, limits or self.limits, slot)
        finally:
            self._slots.put(slot)

    def _run(self, program: str, files: dict[str, str], limits: SandboxLimits, slot: int) -> SandboxResult:
        uid = BASE_UID + slot if self.as_root else os.getuid()
        scratch = Path(tempfile.mkdtemp(prefix=f"run{slot}-", dir=self.base))
        try:
            self._prepare(scratch, program, files, uid)
            return self._execute(scratch, limits, uid)
        finally:
            if self.as_root and self.level != "bwrap":
                self._kill_uid(uid)   # stragglers (a fork bomb's children) die with their uid
            shutil.rmtree(scratch, ignore_errors=True)

    def _prepare(self, scratch: Path, program: str, files: dict[str, str], uid: int) -> None:
        for name, text in {**files, "program.py": program, "runner.py": RUNNER.read_text()}.items():
            target = (scratch / name).resolve()
            if scratch.resolve() not in target.parents:
                raise ValueError(f"sandbox file name {name!r} escapes the scratch directory")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        if self.as_root:
            for path in [scratch, *scratch.rglob("*")]:
                os.chown(path, uid, uid)
        os.chmod(scratch, 0o700)

    def _nproc(self, limits: SandboxLimits) -> int:
        if self.as_root:
            return limits.max_processes + EXTRA_PROCS
        # Our own uid: the limit counts every process we already have, so add them.
        mine = sum(1 for p in Path("/proc").iterdir() if p.name.isdigit() and _owner(p) == os.getuid())
        return mine + limits.max_processes + EXTRA_PROCS

    def _execute(self, scratch: Path, limits: SandboxLimits, uid: int) -> SandboxResult:
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
               "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"}
        read_fd, write_fd = os.pipe()
        lim = {**limits.to_dict(), "nproc": self._nproc(limits)}
        argv = ["-I", "-S", "runner.py", str(write_fd), json.dumps(lim)]
        kw: dict = {}
        if self.level == "bwrap":
            env["HOME"] = isolation.SANDBOX_HOME
            cmd = isolation.bwrap_command(self.python, str(scratch), argv, env)
            if self.as_root:
                kw = {"user": uid, "group": uid, "extra_groups": []}
        elif self.level == "unshare":
            env["HOME"] = str(scratch)
            cmd = isolation.unshare_command(self.python, uid, argv)
        else:
            env["HOME"] = str(scratch)
            cmd = [self.python, *argv]
            if self.as_root:   # never run untrusted code as root, even without namespaces
                kw = {"user": uid, "group": uid, "extra_groups": []}
        start = time.monotonic()
        try:
            proc = subprocess.Popen(cmd, cwd=scratch, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, pass_fds=(write_fd,), start_new_session=True, **kw)
        except OSError as exc:
            os.close(read_fd)
            os.close(write_fd)
            return SandboxResult(Verdict.CRASHED, reason=f"could not start: {exc}", isolation=self.level)
        os.close(write_fd)
        out, killed_for = _drain(proc, limits, start + limits.wall_seconds)
        wall = time.monotonic() - start
        result_json = _read_all(read_fd)
        os.close(read_fd)
        result = SandboxResult(
            Verdict.CRASHED, stdout=out["stdout"][0].decode("utf-8", "replace"),
            stderr=out["stderr"][0].decode("utf-8", "replace"), stdout_bytes=out["stdout"][1],
            stderr_bytes=out["stderr"][1], exit_code=proc.returncode, wall_seconds=wall, isolation=self.level)
        _decide(result, killed_for, result_json)
        return result

    def _kill_uid(self, uid: int) -> None:
        # kill(-1) as that uid reaches exactly the processes owned by it.
        subprocess.run(["kill", "-9", "-1"], user=uid, group=uid, extra_groups=[],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def _owner(p: Path) -> int:
    try:
        return p.stat().st_uid
    except OSError:
        return -1


def _drain(proc: subprocess.Popen, limits: SandboxLimits, deadline: float) -> tuple[dict, str]:
    """Read stdout/stderr until exit, keeping the first max_output_bytes of each; kill the process
    group on the wall-clock deadline or when the output passes kill_output_bytes."""
    out = {"stdout": [b"", 0], "stderr": [b"", 0]}
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    killed_for = ""
    while sel.get_map():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            killed_for = "wall"
            break
        for key, _ in sel.select(timeout=min(remaining, 0.5)):
            chunk = os.read(key.fileobj.fileno(), 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            kept, total = out[key.data]
            if len(kept) < limits.max_output_bytes:
                kept += chunk[: limits.max_output_bytes - len(kept)]
            out[key.data] = [kept, total + len(chunk)]
        if out["stdout"][1] + out["stderr"][1] > limits.kill_output_bytes:
            killed_for = "output"
            break
    if killed_for:
        _kill_tree(proc)
    sel.close()
    try:
        proc.wait(timeout=max(1.0, deadline - time.monotonic()) if not killed_for else 5)
    except subprocess.TimeoutExpired:
        killed_for = killed_for or "wall"
        _kill_tree(proc)
        proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    return out, killed_for


def _kill_tree(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)   # bwrap's --die-with-parent and pid namespace take the rest
    except ProcessLookupError:
        pass


def _read_all(fd: int) -> str:
    os.set_blocking(fd, False)
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    return b"".join(chunks).decode("utf-8", "replace")


def _decide(result: SandboxResult, killed_for: str, result_json: str) -> None:
    if killed_for == "wall":
        result.verdict, result.reason = Verdict.TIMEOUT, f"wall clock over {result.wall_seconds:.1f}s"
        return
    if killed_for == "output":
        result.verdict, result.reason = Verdict.BLOCKED, "output_limit"
        result.blocked_events = ["output_limit"]
        return
    try:
        data = json.loads(result_json) if result_json else None
    except json.JSONDecodeError:
        data = None   # the program wrote into our result pipe: do not trust it
    if isinstance(data, dict) and data.get("status") in {v.value for v in Verdict}:
        result.verdict = Verdict(data["status"])
        result.reason = str(data.get("reason", ""))
        result.blocked_events = [str(e) for e in data.get("blocked", [])][:20]
        return
    code = result.exit_code
    if code is not None and (code in (-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU, 128 + signal.SIGKILL)):
        result.verdict, result.reason = Verdict.TIMEOUT, "cpu limit (killed)"
    elif "MemoryError" in result.stderr:
        result.verdict, result.reason = Verdict.MEMORY, "MemoryError"
    else:
        result.verdict, result.reason = Verdict.CRASHED, f"exit code {code} without a result"
