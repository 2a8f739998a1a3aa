"""Start one sandboxed child (child.py, in a role) and talk to it line by line, with deadlines.

Nothing a child does can block or crash the parent: every read and write has a deadline, stderr is
drained and capped while waiting, an over-long line or too much output kills the child, and a
malformed line is returned as a reason string, never raised.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from . import isolation
from .isolation import MemoryCgroup
from .limits import SandboxLimits
from .seccomp import program as seccomp_program
from .wire import WireError, dumps_line, loads_line

HERE = Path(__file__).parent
CHILD_SOURCE = "\n".join((HERE / name).read_text() for name in ("wire.py", "zygote_child.py", "child.py"))
SECCOMP = seccomp_program().hex()
BASE_UID = 61000     # the probe's uid range; each Sandbox draws its own base (see sandbox.py)
EXTRA_PROCS = 4      # bwrap's and unshare's own processes count against RLIMIT_NPROC too
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
       "PYTHONIOENCODING": "utf-8", "HOME": "/scratch"}


class Child:
    def __init__(self, proc: subprocess.Popen, limits: SandboxLimits, cgroup: MemoryCgroup | None,
                 host_dir: str | None, role: str):
        self.proc, self.limits, self.cgroup, self.host_dir, self.role = proc, limits, cgroup, host_dir, role
        self.oom_before = cgroup.oom_kills() if cgroup else 0
        self.start = time.monotonic()
        self.stderr = bytearray()
        self.stderr_total = 0
        self.stdout_total = 0
        self._buf = bytearray()
        self._partial = 0          # bytes of the line not yet ended by a newline
        self._scanned = 0          # bytes of _buf already known to hold no newline
        self._out_open = True
        self.killed_for = ""
        self.uid_to_clear: int | None = None
        self.sel = selectors.DefaultSelector()
        self.sel.register(proc.stdout, selectors.EVENT_READ, "out")
        self.sel.register(proc.stderr, selectors.EVENT_READ, "err")
        os.set_blocking(proc.stdin.fileno(), False)

    # -- I/O -----------------------------------------------------------------------------------------

    def _read(self, key) -> None:
        try:
            chunk = os.read(key.fileobj.fileno(), 65536)
        except OSError:
            chunk = b""
        if not chunk:
            self.sel.unregister(key.fileobj)
            if key.data == "out":
                self._out_open = False
            return
        if key.data == "err":
            self.stderr_total += len(chunk)
            room = self.limits.max_output_bytes - len(self.stderr)
            if room > 0:
                self.stderr += chunk[:room]
        elif self.role == "program":   # plain output, capped like stderr
            self.stdout_total += len(chunk)
            room = self.limits.max_output_bytes - len(self._buf)
            if room > 0:
                self._buf += chunk[:room]
        else:
            self.stdout_total += len(chunk)
            self._buf += chunk
            end = chunk.rfind(b"\n")   # the unfinished line's length, whatever complete lines precede it
            self._partial = self._partial + len(chunk) if end < 0 else len(chunk) - end - 1
            if self._partial > self.limits.max_message_bytes:
                self.kill("message_too_long")
        if self.stderr_total + self.stdout_total > self.limits.kill_output_bytes:
            self.kill("output_limit")

    def _pump(self, deadline: float, want_write: bytes | None = None) -> bytes | None:
        """Wait for readable output (draining it) or, with want_write, until it is all written."""
        data = want_write
        if data is not None:
            fd_in = self.proc.stdin.fileno()
            self.sel.register(fd_in, selectors.EVENT_WRITE, "in")
        try:
            while not self.killed_for:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return data
                events = self.sel.select(timeout=min(remaining, 1.0))
                for key, _ in events:
                    if key.data == "in":
                        try:
                            data = data[os.write(fd_in, data):]
                        except (BrokenPipeError, OSError):
                            return data
                        if not data:
                            return b""
                    else:
                        self._read(key)
                if data is None and (b"\n" in self._buf or not self._out_open or events):
                    return None
                if data is None and not self.sel.get_map():
                    return None
        finally:
            if want_write is not None:
                try:
                    self.sel.unregister(fd_in)
                except (KeyError, ValueError):
                    pass
        return data

    def send(self, obj: dict, deadline: float) -> str | None:
        """None when written; else why not."""
        if self.killed_for:
            return self.killed_for
        left = self._pump(deadline, dumps_line(obj))
        if left:
            return self.killed_for or ("timeout" if time.monotonic() >= deadline else self.ended())
        return None

    def recv(self, deadline: float) -> dict | str:
        """The next protocol message, or why there is none (timeout, ended, malformed, ...)."""
        while True:
            end = self._buf.find(b"\n", self._scanned)   # each byte is scanned once: a long line stays linear
            self._scanned = len(self._buf) if end < 0 else 0
            if end >= 0:   # take the line off the front (bytearray does not copy what follows)
                line = bytes(self._buf[:end])
                del self._buf[:end + 1]
                try:
                    return loads_line(line)
                except WireError as exc:
                    return f"malformed output: {exc}"
            if self.killed_for:
                return self.killed_for
            if not self._out_open:
                return self.ended()
            if time.monotonic() >= deadline:
                return "timeout"
            self._pump(deadline)

    def drain(self, deadline: float) -> None:
        """Read all output until the child closes it (program role), or the deadline (then kill)."""
        while self.sel.get_map() and not self.killed_for:
            if time.monotonic() >= deadline:
                self.kill("wall")
                break
            self._pump(deadline)

    def ended(self) -> str:
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "closed its output but did not exit"
        if self.memory_killed():
            return "memory limit (killed)"
        if code in (-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU, 128 + signal.SIGKILL):
            return "cpu limit (killed)" if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU) else f"killed ({code})"
        return f"the process ended (exit code {code})"

    def memory_killed(self) -> bool:
        return bool(self.cgroup and self.cgroup.oom_kills() > self.oom_before) or self.stderr.rstrip().endswith(
            b"MemoryError")

    # -- end -----------------------------------------------------------------------------------------

    def kill(self, why: str = "killed") -> None:
        """Kill the sandbox from the inside out: first the namespace's pid 1 (the kernel then kills
        the rest of the namespace), so that bwrap/unshare reap it and exit; killing them first would
        leave the inner process to the container's init, which may never reap it (a zombie)."""
        self.killed_for = self.killed_for or why
        if self.proc.returncode is None:   # not reaped yet, so its pid and group id are still ours
            inner = _children(self.proc.pid) if self.level != "rlimits" else []
            for pid in inner:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if inner:
                try:
                    self.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
            if self.proc.returncode is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        if self.cgroup:
            self.cgroup.kill_all()

    def close(self, grace: float = 2.0) -> int | None:
        """Close stdin, let it exit within `grace` seconds (draining), else kill; then make sure
        nothing it started is left (cgroup, uid) and remove its host directory (weak level only)."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        deadline = time.monotonic() + grace
        while self.sel.get_map() and time.monotonic() < deadline and not self.killed_for:
            self._pump(deadline)
            self._buf.clear()
            self._scanned = 0
        self._end(deadline)
        self.sel.close()
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()
        return self.proc.returncode

    def _end(self, deadline: float) -> None:
        try:
            self.proc.wait(timeout=max(0.05, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill("wall")
            self.proc.wait()
        if self.cgroup:
            self.cgroup.kill_all()
            self.cgroup.wait_released()
        if self.uid_to_clear is not None:   # rlimits level: stragglers die with their uid
            subprocess.run(["kill", "-9", "-1"], user=self.uid_to_clear, group=self.uid_to_clear, extra_groups=[],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        if self.host_dir:
            subprocess.run(["rm", "-rf", "--one-file-system", self.host_dir], check=False)


def spawn(level: str, role: str, job: dict | None, limits: SandboxLimits, *, uid: int | None, nonce: str,
          cgroup: MemoryCgroup | None, die_with_parent: bool = True, control_fd: int | None = None) -> Child | str:
    """Start a child; a string (the reason) when it could not even start. With `job=None` the
    child starts and waits for its first line (a pre-started solution process, see sandbox.py).
    `control_fd` is passed on, under its number, to a zygote (see zygote.py)."""
    python = isolation.sandbox_python()
    as_root = os.geteuid() == 0
    nproc = limits.max_processes + EXTRA_PROCS
    if not as_root:   # our own uid: RLIMIT_NPROC counts what we already run
        nproc += sum(1 for p in Path("/proc").iterdir() if p.name.isdigit() and _owner(p) == os.getuid())
    cfg = {"role": role, "level": level, "uid": uid if as_root else os.getuid(), "nonce": nonce,
           "limits": limits.child_dict(nproc=nproc), "seccomp": SECCOMP, "control_fd": control_fd}
    argv = ["-I", "-S", "-c", CHILD_SOURCE, json.dumps(cfg)]
    env, cwd, host_dir = dict(ENV), "/", None
    if level == "bwrap":
        cmd = isolation.bwrap_command(python, argv, env, cfg["limits"], die_with_parent=die_with_parent)
        env = {}
        if as_root:
            cmd = isolation.drop_to(uid, cmd)
    elif level == "unshare":
        cmd = isolation.unshare_command(python, argv)
    else:
        host_dir = tempfile.mkdtemp(prefix="cidermill-weak-")
        env["HOME"] = cwd = host_dir
        cmd = [python, *argv]
        if as_root:   # never run untrusted code as root, even without namespaces
            os.chown(host_dir, uid, uid)
            cmd = isolation.drop_to(uid, cmd)
    if cgroup is not None:
        cmd = isolation.in_cgroup(cgroup.procs_file, cmd)
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True,
                                pass_fds=() if control_fd is None else (control_fd,))
    except OSError as exc:
        return f"could not start: {exc}"
    child = Child(proc, limits, cgroup, host_dir, role)
    child.level = level
    if level == "rlimits" and as_root:
        child.uid_to_clear = uid
    child.nonce = nonce
    if job is not None:
        why = child.send(job, time.monotonic() + 10)
        if why:
            child.kill(why)
    return child


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def _owner(p: Path) -> int:
    try:
        return p.stat().st_uid
    except OSError:
        return -1
