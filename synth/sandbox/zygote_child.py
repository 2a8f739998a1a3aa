"""The zygote's side of zygote.py, inside the sandbox: part of the sandboxed process's source (see
child.py, which defines CFG, LIM, `_send`, `_cpu_limit` and `serve_solution`, and calls `main`).
Standard library only; definitions only."""

import os
import signal

# Modules solutions and tests commonly import, loaded once by the zygote and the tests server so a
# forked process's import is a lookup. The standard library's own (nothing of the parent's); a forked
# process that changes one changes its own copy. No name of the tests is bound by this.
PRELOAD = ("typing", "math", "re", "collections", "itertools", "functools", "heapq", "bisect", "string")


def _preload():
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass


def serve_zygote(out):
    """The zygote's loop: {"op": "fork", "n": nonce} with three fds (the item's request pipe, its
    protocol pipe, its stderr pipe), then {"op": "end"}; one "reaped" reply per item. Only trusted code
    runs here: untrusted code runs only in the forked child, after `_item` set it up."""
    import ctypes
    import socket

    if os.getpid() != 1:   # kill(-1) below must mean "everything in this sandbox"
        raise SystemExit("the zygote must be pid 1 of its own pid namespace")
    # Not dumpable: an item (same uid) cannot open /proc/1/mem, /proc/1/fd or /proc/1/environ.
    ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)   # PR_SET_DUMPABLE
    # pid 1 gets only the signals it has a handler for from inside its namespace: keep it handler-free.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _preload()
    ctl = socket.socket(fileno=CFG["control_fd"])
    _send(out, {"op": "ready"})   # start-up is not charged to the first item's time limit
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 4096, 4)
        except OSError:
            os._exit(1)
        if not msg:
            os._exit(0)   # the parent is gone
        job = loads_line(msg)
        if job.get("op") != "fork" or len(fds) != 3:
            os._exit(2)   # out of step with the parent: it restarts this zygote
        try:
            pid = os.fork()
        except OSError:
            pid = None
        if pid == 0:
            _item(job["n"], fds)
        for fd in fds:
            os.close(fd)
        end = ctl.recv(4096)   # the parent ends the item (done, killed, or timed out)
        status = _end_item(pid)
        if not end:
            os._exit(0)
        _send(out, {"op": "reaped", "n": job["n"], "status": status, "dirty": _dirt()})


def _item(nonce, fds):
    """The forked child: own fds only, the item's limits, then the solution (never returns)."""
    try:
        req, pout, err = fds
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(err, 1)
        os.dup2(err, 2)
        for name in os.listdir("/proc/self/fd"):   # the control socket and the zygote's own pipe go
            if int(name) not in (0, 1, 2, req, pout):
                try:
                    os.close(int(name))
                except OSError:
                    pass
        os.set_inheritable(req, False)
        os.set_inheritable(pout, False)
        _cpu_limit()
        import ctypes
        ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)   # dumpable again, like any fresh process
        try:
            with open("/proc/self/oom_score_adj", "w") as f:   # the OOM killer takes the item, not the zygote
                f.write("1000")
        except OSError:
            pass   # a preference only: a zygote the OOM killer takes is replaced (zygote.py)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        rin = os.fdopen(req, "rb")
        serve_solution(loads_line(rin.readline()), rin, pout, nonce)
    finally:
        os._exit(0)


def _end_item(pid):
    """Kill every process in this pid namespace but pid 1 (atomic against forks: a process with a
    pending SIGKILL cannot fork), reap them all (orphans are reparented to pid 1), and return the
    item's exit code (negative: a signal), or None when it never started."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    status = None
    while True:
        try:
            got, st = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if got == pid:
            status = os.waitstatus_to_exitcode(st)
    return status


def _dirt():
    """Empty the tmpfs and remove SysV IPC objects; what is left (then the parent restarts the zygote)."""
    left = [p for p in ("/proc", "/scratch", "/tmp", "/dev/shm") if not _wipe(p)]
    left += _ipc_rmid()
    return left


def _wipe(top):
    """Remove everything under `top` (except for /proc, which only gets checked for processes);
    True when nothing is left. An item may have taken the permissions off its directories."""
    if top == "/proc":
        return [p for p in os.listdir("/proc") if p.isdigit()] == ["1"]
    try:
        os.chmod(top, 0o700)
        for entry in os.scandir(top):
            path = os.path.join(top, entry.name)
            if entry.is_dir(follow_symlinks=False):
                _wipe(path)
                os.rmdir(path)
            else:
                os.unlink(path)
        return not os.listdir(top)
    except (OSError, RecursionError):
        return False


def _ipc_rmid():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    left = []
    for kind in ("shm", "msg", "sem"):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                ids = [int(line.split()[1]) for line in f.read().splitlines()[1:] if line.strip()]
        except (OSError, ValueError, IndexError):
            continue
        for ident in ids:   # IPC_RMID is 0
            rc = libc.semctl(ident, 0, 0) if kind == "sem" else getattr(libc, f"{kind}ctl")(ident, 0, None)
            if rc != 0:
                left.append(f"sysv {kind} {ident}")
    return left
