"""Probes at each isolation level: no host file readable or writable outside scratch, nothing left
after the run, no memory held beyond the limit (tmpfs, memfd), no host process visible."""

from __future__ import annotations

import json
import os
import secrets
import sys
from pathlib import Path

import pytest

from manifests.errors import ConfigError
from synth.sandbox import Sandbox, Verdict
from tests.system_deps import require_isolation

from .conftest import LIMITS

REPO = Path(__file__).resolve().parents[3]

TRY_READ = r'''
import json, os, sys
hits = []
for path in sys.argv_paths:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            open(path, "rb").read(1)
        hits.append(path)
    except OSError:
        pass
print(json.dumps(hits))
'''


def _run(box, code: str, **subs) -> tuple[Verdict, str, str]:
    prefix = "".join(f"import sys\nsys.{k} = {v!r}\n" for k, v in subs.items())
    r = box.run(prefix + code)
    return r.verdict, r.stdout, r.stderr


def test_host_files_are_not_readable(box):
    token = secrets.token_hex(6)
    host_tmp, host_shm = Path(f"/tmp/cidermill-probe-{token}"), Path(f"/dev/shm/cidermill-probe-{token}")
    host_tmp.write_text("secret")
    host_shm.write_text("secret")
    try:
        paths = [str(REPO / "README.md"), str(REPO / "synth" / "sandbox" / "judge.py"), str(REPO), "/root",
                 "/home", "/etc/shadow", "/etc/passwd", "/etc/hostname", "/work", str(host_tmp), str(host_shm),
                 sys.executable, str(Path(sys.executable).resolve().parents[1]), "/var", "/run", "/sys/fs/cgroup"]
        verdict, out, err = _run(box, TRY_READ, argv_paths=paths)
    finally:
        host_tmp.unlink()
        host_shm.unlink()
    assert verdict is Verdict.PASSED, err
    assert json.loads(out) == []


def test_no_host_process_is_visible(box):
    code = ("import os, json\npids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
            "cmds = [open(f'/proc/{p}/cmdline', 'rb').read().decode('utf-8', 'replace')[:40] for p in pids]\n"
            "print(json.dumps(cmds))")
    verdict, out, err = _run(box, code)
    assert verdict is Verdict.PASSED, err
    cmds = json.loads(out)
    # Only this sandbox's own processes: its python (pid 1 of the namespace) and maybe unshare's.
    assert 1 <= len(cmds) <= 2 and all(c.startswith(("/usr/bin/python3", "unshare")) for c in cmds), cmds


def test_nothing_outside_scratch_is_writable(box):
    code = r'''
import json, os, sys
ok = []
for path in sys.argv_paths:
    try:
        with open(path, "w") as f:
            f.write("x")
        ok.append(path)
    except OSError:
        pass
print(json.dumps(ok))
'''
    token = secrets.token_hex(6)
    paths = [f"/pwned-{token}", f"/usr/pwned-{token}", f"/usr/lib/pwned-{token}", f"/etc/pwned-{token}",
             f"/proc/pwned-{token}", f"/dev/pwned-{token}", str(REPO / f"pwned-{token}"), f"/scratch/ok-{token}",
             f"/tmp/private-{token}", f"/dev/shm/private-{token}"]
    verdict, out, err = _run(box, code, argv_paths=paths)
    assert verdict is Verdict.PASSED, err
    # Only the sandbox's own tmpfs mounts take writes; none of them is the host's.
    assert json.loads(out) == [f"/scratch/ok-{token}", f"/tmp/private-{token}", f"/dev/shm/private-{token}"]
    for host in (Path("/tmp"), Path("/dev/shm"), REPO, Path("/usr"), Path("/")):
        assert not list(host.glob(f"*{token}*")), host


def test_nothing_outlives_the_run(box):
    token = secrets.token_hex(6)
    code = f'''
import os, time
for d in ("/scratch", "/tmp", "/dev/shm"):
    open(f"{{d}}/left-{token}", "w").write("x")
if os.fork() == 0:          # a daemon that tries to outlive the run
    os.setsid()
    if os.fork() == 0:
        while True:
            time.sleep(0.05)
    os._exit(0)
time.sleep(0.2)
'''
    verdict, _, err = _run(box, code)
    assert verdict is Verdict.PASSED, err
    for host in (Path("/tmp"), Path("/dev/shm")):
        assert not list(host.rglob(f"left-{token}")) if host == Path("/dev/shm") else \
            not list(host.glob(f"left-{token}"))
    uids = {box.uid(slot, 3) for slot in range(box.max_workers)}
    assert _processes_of(uids) == []
    # The next run starts from an empty scratch.
    verdict, out, _ = _run(box, "import os; print(sorted(os.listdir('/scratch') + os.listdir('/tmp')))")
    assert out.strip() == "[]"


def _processes_of(uids: set[int]) -> list[int]:
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                status = (p / "status").read_text()
            except OSError:
                continue
            uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
            if uid in uids:
                found.append(int(p.name))
    return found


FILL = r'''
import os, sys
def fill(write):
    total, chunk = 0, b"x" * (4 * 1024 * 1024)
    try:
        while total < 1024 ** 3:
            write(chunk)
            total += len(chunk)
            print(total, flush=True)
    except (OSError, MemoryError) as exc:
        print("stopped", type(exc).__name__, flush=True)
'''


@pytest.mark.parametrize("target,cap", [("/scratch/big", LIMITS.scratch_bytes), ("/tmp/big", LIMITS.tmp_bytes),
                                        ("/dev/shm/big", LIMITS.shm_bytes)])
def test_tmpfs_is_size_capped(box, target, cap):
    code = FILL + f"f = open({target!r}, 'wb', buffering=0)\nfill(f.write)\n"
    verdict, out, err = _run(box, code)
    lines = out.split()
    written = max([int(x) for x in lines if x.isdigit()] or [0])
    assert "stopped" in out and written <= cap, (verdict, out[-200:], err[-300:])


def test_memfd_counts_against_the_memory_limit(box):
    if box.memory_accounting == "rlimit":
        pytest.fail("no memory cgroup could be created here: memfd is not bounded (see the README's threat model)")
    # RLIMIT_FSIZE caps each memfd at max_file_bytes, so take a new one whenever one is full.
    code = FILL + """
fds = [os.memfd_create('hold')]
def write(b):
    try:
        os.write(fds[-1], b)
    except OSError:
        fds.append(os.memfd_create('hold'))
        os.write(fds[-1], b)
fill(write)
import time; time.sleep(5)
"""
    verdict, out, err = _run(box, code)
    written = max([int(x) for x in out.split() if x.isdigit()] or [0])
    # Killed by the cgroup (or refused) before holding more than the limit; never passed holding 1 GiB.
    assert verdict in (Verdict.MEMORY, Verdict.FAILED, Verdict.CRASHED), (verdict, out[-200:])
    assert written <= LIMITS.memory_bytes, written
    # And the memory is released when the run ends.
    cg = box._cgroups[(0, 3)]
    assert 0 <= cg.usage() < 32 * 1024**2


def test_scratch_writes_never_reach_the_host_disk(box):
    # /scratch is a tmpfs in the sandbox's own mount namespace: the host sees no file at all.
    verdict, out, _ = _run(box, "import os\nprint(os.statvfs('/scratch').f_blocks * os.statvfs('/scratch').f_frsize)")
    assert verdict is Verdict.PASSED and int(out) == LIMITS.scratch_bytes


def test_network_is_unreachable(box):
    code = ("import socket, json\nnames = sorted(n for _, n in socket.if_nameindex())\n"
            "try:\n    socket.create_connection(('1.1.1.1', 80), timeout=2)\n    net = 'open'\n"
            "except OSError as e:\n    net = 'refused'\nprint(json.dumps([names, net]))")
    verdict, out, err = _run(box, code)
    assert verdict is Verdict.PASSED, err
    assert json.loads(out) == [["lo"], "refused"]


def test_weak_isolation_must_be_asked_for_and_is_recorded():
    with pytest.raises(ConfigError, match="allow_weak_isolation"):
        Sandbox(isolation_level="rlimits")
    with Sandbox(LIMITS, isolation_level="rlimits", allow_weak_isolation=True, max_workers=1) as sb:
        j = sb.judge("def f(x):\n    return x\n", "assert f(1) == 1\n")
        assert (j.verdict, j.isolation) == ("passed", "rlimits")
        assert sb.describe()["weak_isolation"] is True


def test_sysv_shared_memory_counts_and_goes_with_the_run(box):
    # SysV segments outlive their process unless removed; in the sandbox's own IPC namespace they
    # go with it, and while they exist they count against the memory cgroup.
    code = FILL + """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
segs = []
def write(b):
    seg = libc.shmget(0, len(b), 0o1600)   # IPC_PRIVATE, IPC_CREAT | 0600
    if seg < 0:
        raise OSError(ctypes.get_errno(), "shmget")
    addr = libc.shmat(seg, None, 0)
    ctypes.memset(addr, 1, len(b))
    segs.append(seg)
fill(write)
import time; time.sleep(5)
"""
    verdict, out, err = _run(box, code)
    written = max([int(x) for x in out.split() if x.isdigit()] or [0])
    assert verdict is not Verdict.PASSED and written <= LIMITS.memory_bytes, (verdict, out[-200:], err[-200:])
    assert 0 <= box._cgroups[(0, 3)].usage() < 32 * 1024**2


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the seccomp deny list is written for x86_64")
def test_kernel_attack_surface_syscalls_are_refused(box):
    code = ("import ctypes, json\nlibc = ctypes.CDLL(None, use_errno=True)\nout = {}\n"
            "for name, nr in [('ptrace', 101), ('keyctl', 250), ('bpf', 321), ('unshare', 272), ('setns', 308),"
            " ('io_uring_setup', 425), ('userfaultfd', 323), ('mount', 165), ('perf_event_open', 298)]:\n"
            "    ctypes.set_errno(0)\n    out[name] = [libc.syscall(nr, 0, 0, 0, 0, 0), ctypes.get_errno()]\n"
            "print(json.dumps(out))")
    verdict, out, err = _run(box, code)
    assert verdict is Verdict.PASSED, err
    assert set(map(tuple, json.loads(out).values())) == {(-1, 1)}   # every one: EPERM from the filter
    assert box.describe()["seccomp"] == "x86_64 deny list"


@pytest.mark.parametrize("level", ["bwrap", "unshare"])
def test_closing_a_sandbox_leaves_no_process_and_no_cgroup(level):
    require_isolation(level)
    sb = Sandbox(LIMITS, isolation_level=level, max_workers=2)
    js = sb.judge_many([{"solution": "import os\ndef f(x):\n    os.fork()\n    return x", "tests": "assert f(1) == 1\n"},
                        {"solution": "def f(x):\n    return x", "tests": "def c(g):\n    assert g(2) == 2\nc(f)\n"}])
    assert [j.verdict for j in js] == ["passed", "passed"]
    cgroups = [cg.path for cg in sb._cgroups.values() if cg is not None]
    uids = {sb.uid(slot, sub) for slot in range(2) for sub in range(4)}
    assert _processes_of(uids)   # the tests servers and pre-started solution processes are up
    sb.close()
    assert _processes_of(uids) == [] and not any(p.exists() for p in cgroups)
