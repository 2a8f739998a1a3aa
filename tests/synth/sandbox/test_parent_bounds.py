"""The trusted parent cannot be stalled by what the solution sends (issue 36, class 2).

An int's hash is the int modulo 2**61 - 1, so a solution can send many distinct ints with one hash;
n of them in a set or as dict keys cost n**2 probes to insert (30k: ~20 s). The parent decodes and
checks values only within direct.py's budgets and never decodes a relayed one; a bigger value is
checked in the sandboxed tests process, under its time limit, where a slow one is that test's failure.
"""

from __future__ import annotations

import json
import time

import pytest

from synth.sandbox import direct, split_tests
from synth.sandbox import wire
from synth.sandbox.wire import WireError, decode, encode, loads_line

P = (1 << 61) - 1
N = 20_000   # colliding keys: ~10 s of parent CPU before issue 36, a few ms now

# The solution writes its own reply on the protocol channel (the nonce is in its own process, a
# local of the frame that calls it): a dict or set of N distinct ints that all hash alike, which it
# could not build itself in time.
FORGE = r'''
import json, os, sys, time
P = (1 << 61) - 1
K = [0]
def _forge(kind):
    K[0] += 1
    frame, nonce = sys._getframe(), ""
    while frame is not None and not nonce:
        nonce = frame.f_locals.get("nonce") if isinstance(frame.f_locals.get("nonce"), str) else ""
        frame = frame.f_back
    keys = [["i", str(7 + i * P)] for i in range(%d)]
    v = ["d", [[k, ["N"]] for k in keys]] if kind == "d" else ["S", keys]
    line = (json.dumps({"n": nonce, "k": K[0], "ok": True, "v": v}) + "\n").encode()
    for fd in sorted(int(f) for f in os.listdir("/proc/self/fd") if int(f) > 2):
        try:
            os.write(fd, line)
        except OSError:
            pass
    time.sleep(60)
''' % N
ATTACKS = {
    "forged_dict": (FORGE + "def f(x):\n    _forge('d')\n", "f(1) == {}"),
    "forged_set": (FORGE + "def f(x):\n    _forge('S')\n", "f(1) == set()"),
    # No forging needed: a plain list of colliding ints, which the assertion turns into a set.
    "returned_list_made_a_set": (f"def f(x):\n    return [7 + i * {P} for i in range({N})]\n", "set(f(1)) == {7}"),
}
LIMITS_BIG_MESSAGES = {"max_message_bytes": 4 * 1024**2, "kill_output_bytes": 8 * 1024**2, "cpu_seconds": 1}


@pytest.fixture(scope="module")
def big_box(box):
    """The level's sandbox with room for a reply of N keys on one line."""
    from dataclasses import replace

    return box, replace(box.limits, **LIMITS_BIG_MESSAGES)


@pytest.mark.parametrize("form", ["parent", "tests process"])
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_colliding_keys_cannot_stall_the_parent(big_box, name, form):
    box, limits = big_box
    solution, assertion = ATTACKS[name]
    helper = f"def c(g):\n    assert {assertion.replace('f(', 'g(')}\n\nc(f)\n"
    tests = f"assert {assertion}\n" if form == "parent" else helper
    cpu = time.thread_time()   # the judge runs in this thread: its CPU time is the parent's work
    j = box.judge(solution, tests, timeout_s=5, limits=limits)   # wall: room for a loaded machine
    cpu = time.thread_time() - cpu
    assert j.verdict == "failed" and j.tests[0].reason, j.tests
    assert j.decided_by == form
    if name.startswith("forged"):   # checked in the tests process, whose decoder refuses it at once
        assert "one hash value" in j.tests[0].reason, j.tests
    assert cpu < 2.0, f"the parent spent {cpu:.1f}s of CPU on one reply"
    assert box.judge("def f(x):\n    return 2 * x\n", "assert f(2) == 4\n").passed   # and it goes on


def test_big_honest_values_are_still_judged_right(box):
    # Past the parent's budgets, the same assertion is checked in the tests process: same verdicts.
    sol = "def f(n):\n    return {i: str(i) for i in range(n)}\ndef g(n):\n    return list(range(n))\n" \
          "def h(n):\n    return frozenset(range(n))\n"
    tests = ["assert len(f(5000)) == 5000", "assert len(f(3000)) == 3001",          # dict keys past the budget
             f"assert sum(g({20_005})) == {sum(range(20_005))}",   # nodes
             "assert len(set(g(3000))) == 3000",                                             # set() in the check
             "assert len(h(2000)) == 2000", "assert max(h(2000)) == 1999",                 # set members
             "assert f(2) == {0: '0', 1: '1'}"]                                              # small: the parent
    j = box.judge(sol, tests, timeout_s=5)
    assert j.decided_by == "parent"
    assert j.results == [1, 0, 1, 1, 1, 1, 1], j.tests
    assert j.tests[1].reason.startswith("AssertionError")


def test_the_decoder_refuses_past_its_budget_before_hashing():
    same = encode({7 + i * P: None for i in range(16)})
    assert len(decode(same)) == 16
    with pytest.raises(wire.TooLarge):
        decode(same, max_hashed=15)
    with pytest.raises(wire.TooLarge):
        decode(encode(list(range(100))), max_nodes=50)
    # Reading a long int's digits costs more than linear: 200 ints of 3001 digits weigh more than 20,000 nodes.
    assert len(decode(encode([10**3000] * 10), max_nodes=20_000)) == 10
    with pytest.raises(wire.TooLarge):
        decode(encode([10**3000] * 200), max_nodes=20_000)
    keys = [["i", str(7 + i * P)] for i in range(60_000)]
    start = time.process_time()
    with pytest.raises(wire.TooLarge):
        decode(["S", keys], max_hashed=1024)
    assert time.process_time() - start < 1.0   # refused before a single key is hashed


def test_many_keys_of_one_hash_are_refused_without_building_the_table():
    # Where a decoder may build big tables (the sandboxed tests process), 17 keys of one hash are refused
    # before insertion: distinct plain values almost never share a hash; only a crafted value does.
    for tree in (["S", [["i", str(7 + i * P)] for i in range(17)]],
                 ["d", [[["i", str(7 + i * P)], ["N"]] for i in range(17)]],
                 ["F", [["t", [["i", str(7 + i * P)]]] for i in range(17)]]):
        with pytest.raises(WireError, match="one hash value"):
            decode(tree)
    start = time.process_time()
    with pytest.raises(WireError, match="one hash value"):
        decode(["S", [["i", str(7 + i * P)] for i in range(100_000)]])
    assert time.process_time() - start < 2.0
    assert decode(encode({-1, -2, 1.5, "a", (1, 2)})) == {-1, -2, 1.5, "a", (1, 2)}   # -1 and -2 share a hash


def test_the_evaluator_charges_what_it_would_hash_or_walk():
    [as_set] = direct.plan(split_tests(["assert set(f(1)) == {7}"]), ["f"], "")
    assert as_set.holds([7] * 10) == (True, "")
    with pytest.raises(wire.TooLarge):
        as_set.holds([7 + i * P for i in range(1025)])
    [concat] = direct.plan(split_tests(["assert sum(f(1), []) == []"]), ["f"], "")
    with pytest.raises(wire.TooLarge):   # sum() of lists is quadratic
        concat.holds([[1]] * 10)
    [sort] = direct.plan(split_tests(["assert sorted(f(1)) == []"]), ["f"], "")
    with pytest.raises(wire.TooLarge):
        sort.holds("x" * 200_001)
    [minus] = direct.plan(split_tests(["assert f(1) - {1} == set()"]), ["f"], "")
    assert minus.holds({1}) == (True, "")
    with pytest.raises(wire.TooLarge):
        minus.holds(set(range(1025)))


def test_a_message_is_a_small_object():
    assert loads_line(json.dumps({"n": "x", "k": 1, "ok": True, "v": ["N"]})) == {"n": "x", "k": 1, "ok": True,
                                                                                  "v": ["N"]}
    with pytest.raises(WireError):   # no table of the sender's keys is built from one line
        loads_line(json.dumps({f"x{i}": 1 for i in range(1000)}))
    with pytest.raises(WireError):
        loads_line('{"k": ' + "9" * 5000 + "}")


# The relayed value is not decoded by the parent: the tests process decodes it strictly. Whatever the
# solution writes there is that call's failure, never an exception in the parent.
FORGE_RAW = r'''
import json, os, time
def f(x):
    cfg = open("/proc/self/cmdline", "rb").read().split(b"\0")
    nonce = next((json.loads(a)["nonce"] for a in cfg if a.startswith(b"{")), "")
    line = '{"n": "%s", "k": 1, "ok": true, "v": ' % nonce + VALUE + '}\n'
    for fd in range(3, 10):
        try:
            os.write(fd, line.encode())
        except OSError:
            pass
    time.sleep(60)
'''


@pytest.mark.parametrize("form", ["parent", "tests process"])
@pytest.mark.parametrize("raw", ['["f", NaN]', '["l", [1e400]]', '["l", [{"a": 1}]]', '["i", 7]',
                                 '["d", [[["l", []], ["N"]]]]', '["S", [["i", "1"], ["f", "0x1.0p+0"]]]',
                                 '{"k": 1}', '"passed"', "[" * 500 + "]" * 500])
def test_a_malformed_value_is_that_tests_failure(box, raw, form):
    tests = "assert f(1) == 1\n" if form == "parent" else "def c(g):\n    assert g(1) == 1\n\nc(f)\n"
    j = box.judge(f"VALUE = {raw!r}\n" + FORGE_RAW, tests, timeout_s=1)
    assert j.verdict == "failed" and j.tests[0].reason, j.tests
    assert box.judge("def f(x):\n    return x\n", tests).passed
