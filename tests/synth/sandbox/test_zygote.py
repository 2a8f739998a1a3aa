"""The solution zygote (synth/sandbox/zygote.py): items forked from one warm process per slot stay
apart. With one slot every item comes from the same zygote, one after another; an item must not
see what an earlier one left (files, SysV IPC, processes), and nothing an item does to the zygote
(signals, /proc, its copy of the runtime) may change a later verdict."""

from __future__ import annotations

import threading
import time

import pytest

from synth.sandbox import Sandbox
from tests.system_deps import require_isolation

from .conftest import LEVELS, LIMITS


@pytest.fixture(scope="module", params=LEVELS)
def one_slot(request):
    require_isolation(request.param)
    with Sandbox(LIMITS, isolation_level=request.param, max_workers=1) as sb:
        yield sb


def zygote_of(sb):
    return sb._zygotes[0]


# Leaves files (one under a directory it made unreadable), SysV objects and processes behind.
LITTER = r'''
import ctypes, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
for path in ("/scratch/a.txt", "/tmp/b.txt", "/dev/shm/c.txt"):
    open(path, "w").write("secret of item 1")
os.makedirs("/scratch/locked/deeper")
open("/scratch/locked/deeper/d.txt", "w").write("secret")
os.chmod("/scratch/locked", 0)
SHM = libc.shmget(4242, 4096, 0o1600)        # IPC_CREAT | 0600
MSG = libc.msgget(4243, 0o1600)
subprocess.Popen(["sleep", "60"], start_new_session=True)
if os.fork() == 0:                            # a grandchild that outlives its parent
    if os.fork() == 0:
        import time
        time.sleep(60)
    os._exit(0)
MQ = libc.mq_open(b"/cidermill-q", 0o100 | 0o2, 0o600, None)   # O_CREAT | O_RDWR
MQ_ERRNO = ctypes.get_errno()

def f():
    return [SHM >= 0, MSG >= 0, MQ, MQ_ERRNO, sorted(os.listdir("/scratch"))]
'''

LOOK = r'''
import os

def f():
    ipc = []
    for kind in ("shm", "msg", "sem"):
        ipc += open(f"/proc/sysvipc/{kind}").read().splitlines()[1:]
    others = sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid()))
    return [sorted(os.listdir(d)) for d in ("/scratch", "/tmp", "/dev/shm")] + [ipc, others]
'''


def test_an_item_sees_no_files_ipc_or_processes_of_the_previous_one(one_slot):
    first = one_slot.judge(LITTER, "assert f() == [True, True, -1, 1, ['a.txt', 'locked']]\n")
    assert first.passed, first.tests   # it did litter; POSIX message queues are refused (EPERM)
    zygote = zygote_of(one_slot)
    second = one_slot.judge(LOOK, "assert f() == [[], [], [], [], []]\n")
    assert second.passed, second.tests
    assert zygote_of(one_slot) is zygote and not zygote.broken   # cleaned up, not restarted


ATTACKS = {
    "signals_to_pid1_and_everyone": "import os, signal\n"
                                    "for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGSTOP):\n"
                                    "    for pid in (1, os.getppid(), -1):\n"
                                    "        try:\n            os.kill(pid, sig)\n"
                                    "        except OSError:\n            pass\n",
    "read_the_zygote_through_proc": "import os\nSEEN = []\n"
                                    "for path in ('/proc/1/mem', '/proc/1/environ', '/proc/1/fd/0', '/proc/1/fd/3'):\n"
                                    "    try:\n        open(path, 'rb').read(1)\n        SEEN.append(path)\n"
                                    "    except OSError:\n        pass\n"
                                    "try:\n    SEEN += os.listdir('/proc/1/fd')\nexcept OSError:\n    pass\n"
                                    "assert not SEEN, SEEN\n",
    "monkeypatch_the_runtime": "import builtins, json, math, sys, typing\n"
                               "builtins.len = lambda x: 0\nmath.sqrt = lambda x: 0.0\njson.loads = None\n"
                               "typing.List = None\nsys.modules['collections'] = None\n",
    "threads_and_forks_left_running": "import os, threading, time\n"
                                      "threading.Thread(target=lambda: time.sleep(60)).start()\n"
                                      "for _ in range(3):\n    if os.fork() == 0:\n        time.sleep(60)\n",
    "fork_bomb_left_running": "import os\nif os.fork() == 0:\n    while True:\n        try:\n            os.fork()\n"
                              "        except OSError:\n            pass\n",
    "close_every_descriptor": "import os\nfor fd in range(64):\n    try:\n        os.close(fd)\n"
                              "    except OSError:\n        pass\n",
    "exit_at_import": "import os\nos._exit(0)\n",
}
GOOD = "from typing import List\nimport math\n\ndef g(xs: List[int]) -> float:\n    return math.sqrt(len(xs))\n"
BAD = GOOD.replace("math.sqrt(len(xs))", "math.sqrt(len(xs)) + 1")
TESTS = "assert g([1, 2, 3, 4]) == 2.0\nassert g([]) == 0.0\n"


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_an_item_that_attacks_its_zygote_changes_no_later_verdict(one_slot, name):
    attack = one_slot.judge(ATTACKS[name] + "\ndef g(xs):\n    return 2.0\n", TESTS)
    # Its own wrong answer for [] (or no answers at all, where it broke its own process).
    assert attack.verdict == "failed" and attack.n_passed <= 1, attack.tests
    good, bad = one_slot.judge(GOOD, TESTS), one_slot.judge(BAD, TESTS)
    assert (good.verdict, good.n_passed) == ("passed", 2), good.tests
    assert (bad.verdict, bad.n_passed) == ("failed", 0), bad.tests
    # The same tests decided in the tests process (a helper makes them non-direct) agree.
    via_tests = one_slot.judge(GOOD, "def c(h):\n    assert h([1, 2, 3, 4]) == 2.0\n\nc(g)\n")
    assert via_tests.passed and via_tests.decided_by == "tests process", via_tests.tests


def test_an_item_cannot_read_the_zygote_through_proc(one_slot):
    spy = ATTACKS["read_the_zygote_through_proc"].replace("assert not SEEN, SEEN\n", "def f():\n    return SEEN\n")
    j = one_slot.judge(spy, "assert f() == []\n")
    assert j.passed, j.tests


def test_signals_cannot_kill_the_zygote(one_slot):
    one_slot.judge(GOOD, TESTS)
    zygote = zygote_of(one_slot)
    pid = zygote.child.proc.pid
    one_slot.judge(ATTACKS["signals_to_pid1_and_everyone"] + "\ndef g(xs):\n    return 2.0\n", TESTS)
    assert zygote_of(one_slot) is zygote and not zygote.broken and zygote.child.proc.poll() is None
    assert zygote.child.proc.pid == pid


def test_a_zygote_killed_between_items_is_restarted_without_a_wrong_verdict(one_slot):
    one_slot.judge(GOOD, TESTS)
    old = zygote_of(one_slot)
    old.child.kill("killed by the test")
    old.child.proc.wait()
    good = one_slot.judge(GOOD, TESTS)
    assert (good.verdict, good.n_passed) == ("passed", 2), good.tests
    assert zygote_of(one_slot) is not old


def test_a_zygote_killed_during_an_item_fails_that_item_only(one_slot):
    one_slot.judge(GOOD, TESTS)
    zygote = zygote_of(one_slot)
    slow = "import time\n\ndef g(xs):\n    time.sleep(1.0)\n    return 2.0\n"
    timer = threading.Timer(0.3, lambda: zygote.child.kill("killed by the test"))
    timer.start()
    try:
        start = time.monotonic()
        hit = one_slot.judge(slow, "assert g([1, 2, 3, 4]) == 2.0\n", timeout_s=3)
    finally:
        timer.join()
    assert hit.verdict == "failed" and hit.tests[0].reason.startswith("the solution:"), hit.tests
    assert time.monotonic() - start < 3
    good = one_slot.judge(GOOD, TESTS)
    assert (good.verdict, good.n_passed) == ("passed", 2), good.tests
    assert zygote_of(one_slot) is not zygote


def test_the_oom_killer_takes_the_item_not_the_zygote(one_slot):
    if one_slot.memory_accounting == "rlimit":
        pytest.skip("no memory cgroup here: memfd memory is bounded per file, nothing is OOM-killed")
    # memfd pages count against the slot's cgroup, not RLIMIT_AS: the cgroup's OOM killer has to choose.
    hog = ("import os\nFDS = []\nwhile True:\n    fd = os.memfd_create('hog')\n    FDS.append(fd)\n"
           "    os.write(fd, b'x' * (8 * 1024 * 1024))\n    os.write(fd, b'x' * (8 * 1024 * 1024))\n"
           "\ndef g(xs):\n    return 2.0\n")
    one_slot.judge(GOOD, TESTS)
    zygote = zygote_of(one_slot)
    hit = one_slot.judge(hog, TESTS)
    assert hit.verdict == "failed" and hit.n_passed == 0, hit.tests
    assert zygote_of(one_slot) is zygote and not zygote.broken   # the item was killed, not the zygote
    good = one_slot.judge(GOOD, TESTS)
    assert (good.verdict, good.n_passed) == ("passed", 2), good.tests
