"""The value encoding: exact built-in types only, and a strict decoder for whatever arrives."""

from __future__ import annotations

import math

import pytest

from synth.sandbox.wire import WireError, decode, encode


@pytest.mark.parametrize("value", [None, True, False, 0, -7, 10**300, 1.5, -0.0, float("inf"), 1 + 2j, "", "é\n",
                                   b"\x00\xff", [1, [2, (3,)]], (), {1, "a"}, frozenset({2}),
                                   {"a": [1], 2: None, (1, 2): {3.5}}])
def test_round_trip_keeps_type_and_value(value):
    back = decode(encode(value))
    assert back == value and type(back) is type(value)
    if isinstance(value, float):
        assert math.copysign(1, back) == math.copysign(1, value)   # -0.0 stays -0.0


def test_nan_crosses_as_nan_and_equals_nothing():
    tree = encode([float("nan")])
    back = decode(tree)
    assert math.isnan(back[0]) and back != decode(tree)   # fresh objects: no identity shortcut


def test_bool_is_not_int_and_tuple_is_not_list():
    assert encode(True) == ["b", True] and encode(1) == ["i", "1"]
    assert type(decode(encode((1,)))) is tuple and type(decode(encode([1]))) is list


@pytest.mark.parametrize("value", [type("I", (int,), {})(3), type("S", (str,), {})("x"), object(),
                                   type("E", (), {"__eq__": lambda s, o: True})(), [1, object()], {1: object()},
                                   len, iter([1])])
def test_anything_but_plain_builtin_data_is_refused(value):
    with pytest.raises(WireError):
        encode(value)


def test_huge_ints_are_refused():
    with pytest.raises(WireError):
        encode(10**5000)


def test_deep_nesting_is_refused():
    v = []
    for _ in range(100):
        v = [v]
    with pytest.raises(WireError):
        encode(v)


@pytest.mark.parametrize("tree", [None, [], ["x"], ["i", 5], ["i", "1e3"], ["i", "--1"], ["b", 1], ["f", 1.0],
                                  ["f", "zz"], ["s", b"x".hex(), "extra"], ["l", "notalist"], ["S", [["l", []]]],
                                  ["S", [["i", "1"], ["i", "1"]]], ["d", [[["i", "1"], ["N"]], [["i", "1"], ["N"]]]],
                                  ["d", [["N"]]], ["y", "zz"], ["N", 1], "passed", {"verdict": "passed"}])
def test_malformed_trees_are_refused(tree):
    with pytest.raises(WireError):
        decode(tree)
