"""Values across the sandbox boundary: a strict, type-tagged encoding of built-in data only.

    encode(value) -> JSON-able tree      decode(tree) -> value      (both raise WireError)

Only exact built-in types cross (`type(v) is int`, never a subclass): None, bool, int, float,
complex, str, bytes, list, tuple, set, frozenset, dict. An object with its own `__eq__`, an `int`
subclass or anything else is refused when encoding, and a tree that is not exactly what `encode`
makes is refused when decoding. A decoded value is made of fresh built-in objects, so comparing it
runs only CPython's own `==` (a NaN equals nothing, identity shortcuts cannot be planted).

This file is also the first part of the code that runs inside the sandbox (see child.py), so it
uses the standard library only and defines nothing else at top level.
"""

import json

MAX_DEPTH = 64
MAX_NODES = 1_000_000
MAX_INT_DIGITS = 4000


class WireError(ValueError):
    pass


def encode(value):
    budget = [MAX_NODES]
    return _enc(value, 0, budget)


def _enc(v, depth, budget):
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        raise WireError("value too large or too deeply nested")
    t = type(v)
    if v is None:
        return ["N"]
    if t is bool:
        return ["b", v]
    if t is int:
        if v.bit_length() > MAX_INT_DIGITS * 3:   # > 4000 digits for sure; str() would refuse anyway
            raise WireError("int too large")
        s = str(v)
        if len(s) > MAX_INT_DIGITS:
            raise WireError("int too large")
        return ["i", s]
    if t is float:
        return ["f", v.hex()]
    if t is complex:
        return ["c", v.real.hex(), v.imag.hex()]
    if t is str:
        return ["s", v]
    if t is bytes:
        return ["y", v.hex()]
    if t is list or t is tuple or t is set or t is frozenset:
        tag = {list: "l", tuple: "t", set: "S", frozenset: "F"}[t]
        return [tag, [_enc(x, depth + 1, budget) for x in v]]
    if t is dict:
        return ["d", [[_enc(k, depth + 1, budget), _enc(x, depth + 1, budget)] for k, x in v.items()]]
    raise WireError(f"value of type {t.__name__!r} is not plain built-in data")


def decode(tree):
    budget = [MAX_NODES]
    return _dec(tree, 0, budget)


def _dec(n, depth, budget):
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        raise WireError("value too large or too deeply nested")
    if type(n) is not list or not n or type(n[0]) is not str:
        raise WireError("malformed value")
    tag, rest = n[0], n[1:]
    if tag == "N" and not rest:
        return None
    if tag == "b" and len(rest) == 1 and type(rest[0]) is bool:
        return rest[0]
    if tag == "i" and len(rest) == 1 and type(rest[0]) is str and len(rest[0]) <= MAX_INT_DIGITS + 1:
        s = rest[0]
        if not (s.isascii() and s.lstrip("-").isdigit() and s.count("-") <= 1):
            raise WireError("malformed int")
        return int(s)
    if tag == "f" and len(rest) == 1 and type(rest[0]) is str:
        return _float(rest[0])
    if tag == "c" and len(rest) == 2 and all(type(x) is str for x in rest):
        return complex(_float(rest[0]), _float(rest[1]))
    if tag == "s" and len(rest) == 1 and type(rest[0]) is str:
        return rest[0]
    if tag == "y" and len(rest) == 1 and type(rest[0]) is str:
        try:
            return bytes.fromhex(rest[0])
        except ValueError:
            raise WireError("malformed bytes") from None
    if tag in ("l", "t", "S", "F") and len(rest) == 1 and type(rest[0]) is list:
        items = [_dec(x, depth + 1, budget) for x in rest[0]]
        if tag == "l":
            return items
        if tag == "t":
            return tuple(items)
        try:
            out = set(items) if tag == "S" else frozenset(items)
        except TypeError:
            raise WireError("unhashable set member") from None
        if len(out) != len(items):
            raise WireError("duplicate set member")
        return out
    if tag == "d" and len(rest) == 1 and type(rest[0]) is list:
        out = {}
        for pair in rest[0]:
            if type(pair) is not list or len(pair) != 2:
                raise WireError("malformed dict item")
            k = _dec(pair[0], depth + 1, budget)
            try:
                if k in out:
                    raise WireError("duplicate dict key")
                out[k] = _dec(pair[1], depth + 1, budget)
            except TypeError:
                raise WireError("unhashable dict key") from None
        return out
    raise WireError(f"malformed value (tag {tag[:8]!r})")


def _float(s):
    if len(s) > 40:
        raise WireError("malformed float")
    try:
        return float.fromhex(s)
    except (ValueError, OverflowError):
        raise WireError("malformed float") from None


def dumps_line(obj):
    """One protocol message: a single line of JSON (never contains a raw newline)."""
    return (json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n").encode()


def loads_line(line):
    """Parse one protocol message; anything but a JSON object raises WireError."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError, UnicodeDecodeError):
        raise WireError("malformed message") from None
    if type(obj) is not dict:
        raise WireError("malformed message")
    return obj
