"""Runs inside the sandbox (standard library only): limits itself, then executes program.py.

    python3 -I -S runner.py RESULT_FD LIMITS_JSON      (cwd = the scratch directory)

It sets the rlimits, installs an audit hook that refuses (and records) network use, writes outside
the scratch directory and reads of host secret paths, runs the program, and writes one JSON result
to RESULT_FD: {"status": passed|failed|memory|timeout|blocked, "reason": ..., "blocked": [...]}.

The OS layer (bubblewrap's namespaces, an unprivileged uid, rlimits) is what actually contains the
program; the audit hook only names what it tried, so that the verdict says "blocked: network"
rather than a bare OSError. Code that bypasses the hook (ctypes) still meets the OS layer.
"""

import json
import os
import resource
import signal
import sys

RESULT_FD = int(sys.argv[1])
LIMITS = json.loads(sys.argv[2])
SCRATCH = os.path.realpath(os.getcwd())
MAIN_PID = os.getpid()
SECRET_PREFIXES = ("/root", "/home", "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh",
                   "/run/secrets", "/var/run/secrets", "/proc/1/", "/sys/")
BLOCKED = []
_done = False


def report(status, reason=""):
    """Write the result once, from the main process only, then exit without running user cleanup."""
    global _done
    if os.getpid() != MAIN_PID:   # a forked child of the program: never reports
        os._exit(1)
    if not _done:
        _done = True
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except BaseException:
                pass
        if BLOCKED and status in ("passed", "failed"):
            status, reason = "blocked", BLOCKED[0]
        data = json.dumps({"status": status, "reason": reason[:2000], "blocked": BLOCKED[:20]})
        try:
            os.write(RESULT_FD, data.encode())
        except OSError:
            pass
    os._exit(0)


def set_limits():
    cpu = int(LIMITS["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (LIMITS["memory_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMITS["max_file_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMITS["max_open_files"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (LIMITS["nproc"],) * 2)
    # Over the soft CPU limit: report a timeout ourselves (the hard limit SIGKILLs as a backstop).
    signal.signal(signal.SIGXCPU, lambda *_: report("timeout", f"cpu limit {cpu}s"))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a too-large write raises OSError(EFBIG) instead


def _block(what):
    BLOCKED.append(what)
    raise PermissionError(f"sandbox: {what} is not allowed")


def _outside_scratch(path):
    full = os.path.realpath(os.path.join(SCRATCH, os.fsdecode(path)))
    return not (full == SCRATCH or full.startswith(SCRATCH + os.sep) or full.startswith("/dev/null"))


def _is_secret(path):
    full = os.path.realpath(os.path.join(SCRATCH, os.fsdecode(path)))
    return full.startswith(SECRET_PREFIXES) or full.endswith("/environ")


WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
PATH_EVENTS = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.symlink",
               "os.link", "os.truncate", "os.utime", "shutil.rmtree", "shutil.copyfile", "shutil.move"}


def audit(event, args):
    if event.startswith("socket.") and event in ("socket.connect", "socket.sendto", "socket.getaddrinfo",
                                                  "socket.gethostbyname", "socket.bind"):
        _block("network")
    elif event == "open" and args and isinstance(args[0], (str, bytes)):
        path, mode, flags = args[0], args[1] or "r", args[2] or 0
        writing = any(c in str(mode) for c in "wax+") or bool(flags & WRITE_FLAGS)
        if _is_secret(path):
            _block(f"reading host secret path {os.fsdecode(path)}")
        if writing and _outside_scratch(path):
            _block(f"write outside scratch ({os.fsdecode(path)})")
    elif event in ("os.listdir", "os.scandir") and args and isinstance(args[0], (str, bytes)) \
            and _is_secret(args[0]):
        _block(f"reading host secret path {os.fsdecode(args[0])}")
    elif event in PATH_EVENTS and args and isinstance(args[0], (str, bytes)) and _outside_scratch(args[0]):
        _block(f"{event} outside scratch ({os.fsdecode(args[0])})")


def main():
    set_limits()
    with open("program.py", encoding="utf-8") as f:
        source = f.read()
    code = compile(source, "program.py", "exec")
    sys.addaudithook(audit)   # after our own file reads; it cannot be removed by the program
    namespace = {"__name__": "__main__", "__file__": "program.py", "__builtins__": __builtins__}
    try:
        exec(code, namespace)
    except SystemExit as exc:
        code_ = exc.code
        ok = code_ is None or code_ == 0
        report("passed" if ok else "failed", "" if ok else f"SystemExit({code_!r})")
    except MemoryError:
        report("memory", "MemoryError")
    except RecursionError as exc:
        report("failed", f"RecursionError: {exc}")
    except PermissionError as exc:   # the OS refused (read-only mount, unprivileged uid)
        if not BLOCKED:   # not one of ours (the hook records those): name what the OS refused
            BLOCKED.append(f"permission denied: {exc}")
        report("blocked", BLOCKED[0])
    except BlockingIOError as exc:   # fork() over RLIMIT_NPROC raises EAGAIN
        BLOCKED.append("process limit")
        report("blocked", f"process limit: {exc}")
    except BaseException as exc:
        report("failed", f"{type(exc).__name__}: {exc}")
    report("passed")


if __name__ == "__main__":
    main()
