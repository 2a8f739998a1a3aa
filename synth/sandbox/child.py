"""The code that runs inside a sandboxed process (standard library only), after wire.py's and
zygote_child.py's source.

    python3 -I -S -c "<wire.py><zygote_child.py><child.py>" CONFIG_JSON

CONFIG_JSON: {"role": solution|tests|program, "level": bwrap|unshare|rlimits, "uid": U,
"limits": {...}, "nonce": hex}. The first line on stdin is the job (JSON). Protocol messages go to
a private duplicate of fd 1; fd 1 and 2 of the untrusted code both go to the stderr pipe.

Roles:
- solution: runs the candidate solution, then answers call requests {"k", "fn", "a", "kw"} with
  {"n": nonce, "k", "ok", "v" | "e"}. It never sees a test, an expected value, or a verdict:
  whatever it writes is data that the parent validates (a forged line is a wrong answer at most).
- tests:    runs the trusted prelude and the tests; the entry points are stubs that ask the
  parent for each call, and no other name is the solution's. The solution never ran in this
  process. A step may name a value (a tree the parent found too costly to check itself; these follow
  the job line): it is decoded here, under the step's time limit, and bound to value_name first.
- program:  runs a whole program (Sandbox.run); its exit status is its outcome.
- zygote:   a slot's warm solution process at the namespace levels (zygote.py has the why): pid 1
  of the slot's sandbox, it runs no untrusted code itself; per item it forks a child that becomes a
  solution process on fresh pipes the parent passes over the control socket, and after the item it
  kills everything else in the pid namespace, reaps it, and empties the tmpfs and the SysV IPC.

At the `unshare` level this process starts as root in fresh mount/pid/net/ipc/uts namespaces and
first builds its own root file system (see _build_root), then drops to the sandbox uid for good.
"""

import builtins
import os
import resource
import signal
import sys

CFG = json.loads(sys.argv[1])
LIM = CFG["limits"]
NONCE = CFG["nonce"]

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}


def _build_root():
    """A private root on a small tmpfs: /usr (and the /lib*, /bin links) read-only, /proc of this
    pid namespace, a few device nodes, size-limited tmpfs for /scratch, /tmp and /dev/shm. The old
    root is detached, so nothing of the host (checkout, /home, /root, /tmp, /dev/shm) is reachable."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def mount(src, dst, fstype, flags, data=None):
        enc = (lambda s: s.encode() if s is not None else None)
        if libc.mount(enc(src), enc(dst), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mount {dst}: {os.strerror(err)}")

    uid = CFG["uid"]
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    new = "/tmp"   # any existing directory: the tmpfs hides the host's /tmp in this namespace only
    mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    mount(None, new, None, MS_REC | MS_PRIVATE)
    os.mkdir(f"{new}/usr")
    mount("/usr", f"{new}/usr", None, MS_BIND | MS_REC)
    mount(None, f"{new}/usr", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = f"/{top}"
        if os.path.islink(host):
            os.symlink(os.readlink(host), f"{new}/{top}")
        elif os.path.isdir(host):
            os.mkdir(f"{new}/{top}")
            mount(host, f"{new}/{top}", None, MS_BIND | MS_REC)
            mount(None, f"{new}/{top}", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.mkdir(f"{new}/proc")
    mount("proc", f"{new}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.mkdir(f"{new}/dev")
    mount("tmpfs", f"{new}/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755")
    for name in ("null", "zero", "full", "random", "urandom"):
        open(f"{new}/dev/{name}", "w").close()
        mount(f"/dev/{name}", f"{new}/dev/{name}", None, MS_BIND)
    for name, size in (("dev/shm", LIM["shm_bytes"]), ("scratch", LIM["scratch_bytes"]), ("tmp", LIM["tmp_bytes"])):
        os.mkdir(f"{new}/{name}")
        mount("tmpfs", f"{new}/{name}", "tmpfs", MS_NOSUID | MS_NODEV,
              f"size={int(size)},nr_inodes=4096,mode=0700,uid={uid},gid={uid}")
    os.chdir(new)
    nr = SYS_PIVOT_ROOT.get(os.uname().machine)
    if nr is not None and libc.syscall(nr, b".", b".") == 0:
        libc.umount2(b".", 2)   # MNT_DETACH: the old root leaves this namespace
    os.chroot(".")
    mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    libc.prctl(38, 1, 0, 0, 0)   # PR_SET_NO_NEW_PRIVS
    os.chdir("/scratch")


def _cpu_limit():
    cpu = int(LIM["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))


def _limits():
    if CFG["role"] not in ("tests", "zygote"):   # a server's CPU time adds up over jobs: its jobs get the limit
        _cpu_limit()
    resource.setrlimit(resource.RLIMIT_AS, (LIM["memory_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIM["max_file_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIM["max_open_files"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (LIM["nproc"],) * 2)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a too-large write raises OSError(EFBIG)


def _channels(buffered):
    """(first line, requests in, protocol out): private fds; the untrusted code's fd 0 is /dev/null
    and its fd 1 and 2 both go to the stderr pipe."""
    rin = os.fdopen(os.dup(0), "rb", buffering=-1 if buffered else 0)
    out = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    first = loads_line(rin.readline())
    return first, rin, out


def _send(fd, obj):
    data = dumps_line(obj)
    while data:
        data = data[os.write(fd, data):]


def _error(exc):
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def serve_solution(job, rin, out, nonce=NONCE):
    ns = {"__name__": "solution", "__builtins__": __builtins__}
    try:
        exec(compile(job["source"], "solution.py", "exec"), ns)
        loaded = None
    except BaseException as exc:   # a syntax error, an exception or SystemExit at import
        loaded = "the solution failed to load: " + _error(exc)
    while True:
        line = rin.readline()
        if not line:
            return
        req = loads_line(line)
        reply = {"n": nonce, "k": req["k"], "ok": False}
        try:
            if loaded:
                raise RuntimeError(loaded)
            fn = ns.get(req["fn"])
            if not callable(fn):
                raise NameError(f"the solution defines no callable {req['fn']!r}")
            value = fn(*decode(req["a"]), **decode(req["kw"]))
            reply.update(ok=True, v=encode(value))
        except BaseException as exc:   # SystemExit in a call is that call's failure
            reply.update(ok=False, e=str(exc)[:300], t=type(exc).__name__)
        try:
            sys.stdout.flush()
        except BaseException:
            pass
        _send(out, reply)


class SolutionError(Exception):
    """A call to the solution raised, ended its process, or returned something that is not data."""


RAISABLE = {c.__name__: c for c in (ValueError, TypeError, KeyError, IndexError, ZeroDivisionError,
                                     ArithmeticError, OverflowError, AttributeError, NotImplementedError)}


def serve_tests_forever(rin, out):
    """A fork server: one fresh forked process per judgement's tests, so a tests process costs a
    fork rather than a sandbox start. This process runs no test code itself; after each job it
    kills the job's process group and empties /scratch, /tmp and /dev/shm."""
    _preload()
    while True:
        line = rin.readline()   # unbuffered: the job's own messages follow on the same pipe
        if not line:
            os._exit(0)
        job = loads_line(line)
        pid = os.fork()
        if pid == 0:
            os.setpgid(0, 0)
            _cpu_limit()
            try:
                # Buffered is safe here: the parent sends nothing past this job before "done".
                serve_tests(job, os.fdopen(os.dup(rin.fileno()), "rb"), out)
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        if CFG["level"] != "rlimits":
            for top in ("/scratch", "/tmp", "/dev/shm"):
                _empty(top)
        _send(out, {"op": "reaped", "n": job["nonce"], "status": status})


def _empty(top):
    try:
        for root, dirs, files in os.walk(top, topdown=False):
            for name in files:
                os.unlink(os.path.join(root, name))
            for name in dirs:
                os.rmdir(os.path.join(root, name))
    except OSError:
        pass


def _value(tree):
    """A value that crossed from the solution: its strict decoding, or the solution's failure."""
    try:
        return decode(tree)
    except WireError as exc:
        raise SolutionError(f"malformed answer: {exc}") from None


def serve_tests(job, rin, out):
    NONCE = job["nonce"]
    counter = [0]

    def stub_for(name):
        def stub(*args, **kwargs):
            counter[0] += 1
            k = counter[0]
            try:
                req = {"op": "call", "n": NONCE, "k": k, "fn": name, "a": encode(list(args)), "kw": encode(kwargs)}
            except WireError as exc:
                raise SolutionError(f"cannot pass this argument to the solution: {exc}") from None
            _send(out, req)
            while True:
                line = rin.readline()
                if not line:
                    raise SolutionError("no answer")
                reply = loads_line(line)
                if reply.get("k") == k:
                    break   # older replies belong to calls a per-test alarm abandoned
            if reply.get("ok"):
                return _value(reply["v"])
            raise RAISABLE.get(reply.get("t"), SolutionError)(str(reply.get("e", ""))[:400])
        stub.__name__ = stub.__qualname__ = name
        return stub

    def alarm(*_):
        raise TimeoutError("per-test time limit")

    signal.signal(signal.SIGALRM, alarm)
    ns = {"__name__": "tests", "__builtins__": builtins}
    broken = None
    for name in job["modules"]:   # the solution's plain `import m` for a name the tests leave free
        try:
            module = __import__(name)
        except BaseException:
            continue
        ns.setdefault(name.split(".")[0], module)
    try:
        exec(compile(job["prelude"], "prelude.py", "exec"), ns)
    except BaseException as exc:
        broken = "the prelude failed: " + _error(exc)
    for name in job["stubs"]:
        # The task's entry points always; inferred ones only where the name means nothing yet.
        if job["force_stubs"] or (name not in ns and not hasattr(builtins, name)):
            ns[name] = stub_for(name)
    values = [loads_line(rin.readline()).get("v") for _ in range(job["n_values"])]
    for i, step in enumerate(job["steps"]):
        kind, src = step[0], step[1]
        ok, err = False, broken
        if broken is None:
            signal.setitimer(signal.ITIMER_REAL, float(job["per_test_seconds"]))
            try:
                if len(step) > 2:
                    ns[job["value_name"]] = _value(values[step[2]])
                exec(compile(src, "tests.py", "exec"), ns)
                ok, err = True, None
            except BaseException as exc:
                err = _error(exc)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        _send(out, {"op": kind, "n": NONCE, "i": i, "ok": ok, "e": err})
    _send(out, {"op": "done", "n": NONCE})


def run_program(job):
    ns = {"__name__": "__main__", "__file__": "program.py", "__builtins__": __builtins__}
    try:
        exec(compile(job["source"], "program.py", "exec"), ns)
    except MemoryError:
        os.write(2, b"\nMemoryError\n")
        os._exit(3)
    except SystemExit:
        raise
    except BaseException as exc:
        os.write(2, ("\n" + _error(exc) + "\n").encode("utf-8", "replace"))
        os._exit(1)


def _seccomp():
    """Install the parent's seccomp filter (seccomp.py) on this process and all it starts."""
    prog = bytes.fromhex(CFG.get("seccomp", ""))
    if not prog:
        return
    import ctypes

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = Fprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "could not install the seccomp filter")   # fail closed


def _stay_init():
    """In a new pid namespace this process is pid 1, which the kernel shields from signals it has
    no handler for (SIGXCPU, even RLIMIT_CPU's SIGKILL). So the work runs in a forked child; pid 1
    only reaps and passes the child's status on."""
    pid = os.fork()
    if pid == 0:
        return
    while True:
        try:
            got, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        if got == pid:
            os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def main():
    if CFG["level"] == "unshare":
        _build_root()
    _seccomp()
    if CFG["level"] != "rlimits" and CFG["role"] not in ("tests", "zygote"):   # these fork per job
        _stay_init()
    _limits()
    if CFG["role"] == "zygote":
        out = os.dup(1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(2, 1)
        serve_zygote(out)
    if CFG["role"] == "program":
        job = loads_line(sys.stdin.buffer.readline())
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        run_program(job)
        sys.exit(0)
    job, rin, out = _channels(buffered=CFG["role"] == "solution")
    if CFG["role"] == "solution":
        serve_solution(job, rin, out)
    elif CFG["role"] == "tests":
        serve_tests_forever(rin, out)
    os._exit(0)


main()
