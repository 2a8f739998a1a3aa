"""A slot's warm solution process: one sandbox start per slot, one fork per item.

Starting a sandboxed solution process costs bubblewrap (or unshare), a Python start-up, the child's
set-up (seccomp, limits) and the solution's imports: most of a judgement's CPU. At the namespace
levels each slot instead keeps a *zygote* (zygote_child.py `serve_zygote`), started once under the same
isolation, seccomp filter and limits as any sandboxed process, with common standard-library modules
imported. It runs no untrusted code. Per item the parent makes three fresh pipes and passes the
child's ends over a control socket (SCM_RIGHTS); the zygote forks, and the fork child closes every
other descriptor (the control socket among them), takes the item's CPU limit and becomes an ordinary
solution process on those pipes: same protocol, same nonce checks, same parent-side bounds, and the
verdict is still decided outside the sandbox (judge.py). Whatever the item does to its copy of the
runtime (monkeypatched modules, threads, builtins) ends with its process.

Items cannot see each other: a slot runs one item at a time, and when the parent ends an item the
zygote, pid 1 of the slot's pid namespace, kills every other process in it (`kill(-1)`, atomic
against forks), reaps them, empties /scratch, /tmp and /dev/shm, removes SysV IPC objects (POSIX
message queues are refused by seccomp), and reports what it could not clean; the parent then
throws the zygote away. So the next item starts with empty tmpfs and no other process.
Why not a pid namespace per item: under bubblewrap the sandbox has no capabilities (`--cap-drop
ALL`), so unshare(CLONE_NEWPID) is refused; keeping CAP_SYS_ADMIN in the zygote would put a
privileged process next to untrusted code. Emptying the slot's namespace between items gives the
same guarantee for items that run one after another.

The zygote itself is out of an item's reach: same uid, but pid 1 of the namespace (the kernel
delivers no signal to it from inside unless it has a handler, and it has none), not dumpable (no
/proc/1/mem or /proc/1/fd), and ptrace is refused by seccomp. If it dies anyway (the cgroup's OOM
killer; the item's own oom_score_adj is 1000 so the item goes first), the item running then fails as
that solution's failure (its process died with the namespace) and the next fork starts a fresh
zygote; a fork that the dead zygote never received is retried on a fresh one, not counted.
"""

from __future__ import annotations

import os
import socket
import time

from .limits import SandboxLimits
from .process import Child
from .wire import dumps_line

ITEMS_PER_ZYGOTE = 500    # replaced after this many items (its own CPU time and memory stay small)
END_SECONDS = 5.0         # for the zygote to kill, reap and clean up after an item
START_SECONDS = 30.0      # for the zygote to start (a loaded machine); never part of an item's time limit


class Zygote:
    def __init__(self, start, limits: SandboxLimits):
        """`start(control_fd)` spawns the sandboxed zygote process (sandbox.py, with the slot's uid
        and cgroup) and returns its Child or why not."""
        self.limits, self.items, self.broken = limits, 0, ""
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            os.set_inheritable(theirs.fileno(), True)
            self.child = start(theirs.fileno())
        finally:
            theirs.close()
        if isinstance(self.child, str):
            self.broken, self.child = self.child, None
            return
        ready = self.child.recv(time.monotonic() + max(START_SECONDS, limits.wall_seconds))
        if not (isinstance(ready, dict) and ready.get("op") == "ready"):
            why = ready if isinstance(ready, str) else "a malformed message"
            self.fail(f"the zygote did not start: {why}: {bytes(self.child.stderr[-300:]).decode('utf-8', 'replace')}")

    def usable(self, limits: SandboxLimits) -> bool:
        return (not self.broken and self.limits == limits and self.items < ITEMS_PER_ZYGOTE
                and self.child.proc.poll() is None and not self.child.killed_for)

    def fork(self, nonce: str) -> "ForkedChild | str":
        """A fresh solution process; the item's first line (its source) is the caller's to send."""
        ours, theirs = [], []
        for _ in range(3):   # request (we write), protocol and stderr (we read)
            r, w = os.pipe()
            ours.append(w if not ours else r)
            theirs.append(r if not theirs else w)
        try:
            self.sock.settimeout(2.0)
            socket.send_fds(self.sock, [dumps_line({"op": "fork", "n": nonce})], theirs)
        except OSError as exc:
            for fd in ours:
                os.close(fd)
            self.fail(f"the zygote did not take the item: {exc}")
            return self.broken
        finally:
            for fd in theirs:
                os.close(fd)
        self.items += 1
        return ForkedChild(self, nonce, *ours)

    def end(self, nonce: str) -> int | None:
        """End the current item: the zygote kills and reaps everything but itself, cleans up, and
        says how the item's process ended (None: unknown, e.g. the zygote is gone: then it is)."""
        if self.broken:
            return None
        deadline = time.monotonic() + END_SECONDS
        try:
            self.sock.settimeout(END_SECONDS)
            self.sock.send(b'{"op":"end"}\n')
        except OSError as exc:
            self.fail(f"the zygote is gone: {exc}")
            return None
        reply = self.child.recv(deadline)
        if not (isinstance(reply, dict) and reply.get("op") == "reaped" and reply.get("n") == nonce):
            self.fail(f"the zygote did not end the item: {reply if isinstance(reply, str) else 'malformed'}")
            return None
        if reply.get("dirty"):
            self.fail(f"left after an item: {str(reply['dirty'])[:200]}")
        status = reply.get("status")
        return status if type(status) is int else None

    def fail(self, why: str) -> None:
        """This zygote is not used again: kill its sandbox (everything in it dies with its pid 1)."""
        self.broken = self.broken or why
        if self.child is not None:
            self.child.kill(why)

    def close(self, grace: float = 0.5) -> None:
        self.sock.close()   # EOF: the zygote exits (and its namespace with it)
        if self.child is not None:
            self.child.close(grace=grace)


class _ItemProcess:
    """What Child needs of a Popen, for a process forked by the zygote (its pid is in the sandbox)."""
    pid = None

    def __init__(self, zygote: Zygote, nonce: str, req: int, out: int, err: int):
        self.zygote, self.nonce = zygote, nonce
        self.stdin, self.stdout, self.stderr = open(req, "wb", 0), open(out, "rb", 0), open(err, "rb", 0)
        self.returncode: int | None = None
        self.ended = False

    def poll(self) -> int | None:
        return self.returncode if self.ended else None

    def wait(self, timeout: float | None = None) -> int | None:
        """Ending is the zygote's: it kills what is left of the item, so this never blocks long."""
        if not self.ended:
            self.ended = True
            code = self.zygote.end(self.nonce)
            self.returncode = -9 if code is None else code
        return self.returncode


class ForkedChild(Child):
    """A solution process forked by the slot's zygote: Child's deadlines, bounds and parsing on its
    own pipes; killing or closing it ends the item through the zygote."""

    def __init__(self, zygote: Zygote, nonce: str, req: int, out: int, err: int):
        z = zygote.child
        super().__init__(_ItemProcess(zygote, nonce, req, out, err), zygote.limits, z.cgroup, None, "solution")
        self.level, self.nonce, self.sub = z.level, nonce, getattr(z, "sub", 0)

    def kill(self, why: str = "killed") -> None:
        self.killed_for = self.killed_for or why
        self.proc.wait()

    def close(self, grace: float = 2.0) -> int | None:
        """As Child.close, but only the item's own protocol pipe is waited for (it closes when the
        item's process exits): whatever the item left running, holding its stderr, is the zygote's
        to kill at once, then the rest of stderr is read."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        deadline = time.monotonic() + grace
        while self._out_open and self.sel.get_map() and time.monotonic() < deadline and not self.killed_for:
            self._pump(deadline)
            self._buf.clear()
            self._scanned = 0
        self.proc.wait()
        deadline = time.monotonic() + 0.5   # everything is dead now: EOF follows what is buffered
        while self.sel.get_map() and time.monotonic() < deadline:
            self._pump(deadline)
            self._buf.clear()
            self._scanned = 0
        self.sel.close()
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()
        return self.proc.returncode
