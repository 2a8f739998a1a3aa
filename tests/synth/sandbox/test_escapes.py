"""Whole programs (Sandbox.run) at each level: contained, each ends with an outcome, nothing raises here."""

from __future__ import annotations

import os

import pytest

from synth.sandbox import Sandbox, Verdict, run_many

from .conftest import LIMITS


def test_normal_program_passes_and_fails(box):
    ok, bad, scratch = run_many(box, [
        "print('hi'); assert 1 + 1 == 2",
        "assert 1 + 1 == 3, 'bad math'",
        "open('note.txt', 'w').write('kept'); print(open('note.txt').read())",
    ])
    assert (ok.verdict, ok.stdout, ok.isolation) == (Verdict.PASSED, "hi\n", box.level)
    assert bad.verdict is Verdict.FAILED and bad.reason == "AssertionError: bad math"
    assert (scratch.verdict, scratch.stdout) == (Verdict.PASSED, "kept\n")


def test_environment_is_scrubbed(box):
    os.environ["CIDERMILL_TEST_SECRET"] = "hunter2"
    try:
        r = box.run("import os; print(sorted(os.environ))")
    finally:
        del os.environ["CIDERMILL_TEST_SECRET"]
    assert r.verdict is Verdict.PASSED and "CIDERMILL_TEST_SECRET" not in r.stdout and "hunter2" not in r.stdout


def test_fork_bomb_memory_bomb_loop_flood_and_segfault_are_contained(box):
    fork, mem, loop, flood, segv = run_many(box, [
        "import os\nwhile True:\n    os.fork()",
        "chunks = []\nwhile True:\n    chunks.append(bytearray(50 * 1024**2))",
        "while True:\n    pass",
        "while True:\n    print('x' * 1000)",
        "import ctypes; ctypes.string_at(0)",
    ])
    assert fork.verdict is Verdict.FAILED and "Resource temporarily unavailable" in fork.reason
    assert mem.verdict is Verdict.MEMORY
    assert loop.verdict is Verdict.TIMEOUT
    assert flood.verdict is Verdict.BLOCKED and flood.reason == "output_limit"
    assert len(flood.stdout) == LIMITS.max_output_bytes and flood.stdout_bytes > LIMITS.max_output_bytes
    assert segv.verdict is Verdict.CRASHED
    # The sandbox still works after all of that.
    assert box.run("print(1)").verdict is Verdict.PASSED


def test_a_failure_is_named_by_its_last_whole_line_not_a_fragment_of_a_forked_process():
    from synth.sandbox.sandbox import failure_line

    # a fork bomb's stderr: tracebacks of many processes on one pipe, the last bytes read cut mid-line
    bomb = ("Traceback (most recent call last):\n  File \"<solution>\", line 3, in <module>\n    os.fork()\n"
            "BlockingIOError: [Errno 11] Resource temporarily unavailable\n"
            "Traceback (most recent call last):\n  File \"<solution>\", line 3, in <module>\nBlo")
    assert failure_line(bomb) == "BlockingIOError: [Errno 11] Resource temporarily unavailable"
    assert failure_line("KeyError: 'k'\nerror: bad input\n") == "error: bad input"   # its own last word stands
    assert failure_line("no newline at the end") == "no newline at the end"
    assert failure_line("") == ""


def test_runs_as_an_unprivileged_uid(box):
    r = box.run("import os; print(os.getuid(), os.geteuid())")
    assert r.verdict is Verdict.PASSED and "0" not in r.stdout.split()


@pytest.mark.skipif(os.geteuid() != 0, reason="uid switching needs root; unprivileged runs keep their own uid")
def test_even_the_weak_level_never_runs_code_as_root():
    with Sandbox(LIMITS, isolation_level="rlimits", allow_weak_isolation=True, max_workers=1) as sb:
        r = sb.run("import os; print(os.getuid())")
    assert r.verdict is Verdict.PASSED and int(r.stdout) != 0
