"""Values across the sandbox boundary: a strict, type-tagged encoding of built-in data only.

    encode(value) -> JSON-able tree      decode(tree) -> value      (both raise WireError)

Only exact built-in types cross (`type(v) is int`, never a subclass): None, bool, int, float,
complex, str, bytes, list, tuple, set, frozenset, dict. An object with its own `__eq__`, an `int`
subclass or anything else is refused when encoding, and a tree that is not exactly what `encode`
makes is refused when decoding. A decoded value is made of fresh built-in objects, so comparing it
runs only CPython's own `==` (a NaN equals nothing, identity shortcuts cannot be planted).

Decoding costs time linear in the tree, except where it builds sets and dicts: their keys' hashes
are the sender's choice (an int's hash is the int modulo 2**61 - 1), so n keys can cost n**2 probes.
So a set or dict with more than MAX_SAME_HASH keys of one hash is refused, tables are filled one key
at a time (a sandboxed decoder's alarm can stop a slow one), and `decode(tree, max_hashed=N)` refuses
(`TooLarge`) a tree with more than N set members and dict keys in all, so that the trusted parent
never builds a big table from untrusted keys (judge.py has a sandboxed process decode those).
JSON objects on the wire are small envelopes (MAX_OBJECT_KEYS), never the sender's tables.

This file is also the first part of the code that runs inside the sandbox (see child.py), so it
uses the standard library only and defines nothing else at top level.
"""

import json

MAX_DEPTH = 64
MAX_NODES = 1_000_000
MAX_INT_DIGITS = 4000
MAX_OBJECT_KEYS = 32          # a protocol message is a small JSON object; values never use JSON objects
MAX_SAME_HASH = 16            # keys of one set or dict that may share a hash value


class WireError(ValueError):
    pass


class TooLarge(WireError):
    """More than the caller's budget of nodes or hashed keys: too costly to decode here."""


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


def decode(tree, *, max_nodes=MAX_NODES, max_hashed=MAX_NODES):
    """The value `tree` encodes. Past `max_nodes` (when below the wire's own MAX_NODES) or
    `max_hashed` it raises TooLarge: the tree may be fine, just too costly for this caller."""
    budget = [max_nodes, max_hashed, TooLarge if max_nodes < MAX_NODES else WireError]
    return _dec(tree, 0, budget)


def _dec(n, depth, budget):
    budget[0] -= 1
    if depth > MAX_DEPTH:
        raise WireError("value too large or too deeply nested")
    if budget[0] < 0:
        raise budget[2]("value too large or too deeply nested")
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
        budget[0] -= len(s) // 16   # reading decimal digits costs more than linear: a long int weighs more
        if budget[0] < 0:
            raise budget[2]("value too large or too deeply nested")
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
        if tag in ("S", "F"):
            _hashing(budget, len(rest[0]))
        items = [_dec(x, depth + 1, budget) for x in rest[0]]
        if tag == "l":
            return items
        if tag == "t":
            return tuple(items)
        out = _table(items, [None] * len(items), "set member")
        return set(out) if tag == "S" else frozenset(out)
    if tag == "d" and len(rest) == 1 and type(rest[0]) is list:
        _hashing(budget, len(rest[0]))
        if any(type(pair) is not list or len(pair) != 2 for pair in rest[0]):
            raise WireError("malformed dict item")
        keys = [_dec(pair[0], depth + 1, budget) for pair in rest[0]]
        return _table(keys, [_dec(pair[1], depth + 1, budget) for pair in rest[0]], "dict key")
    raise WireError(f"malformed value (tag {tag[:8]!r})")


def _table(keys, values, what):
    """A dict of keys -> values, filled one key at a time (an alarm can stop it between two) after
    checking that no more than MAX_SAME_HASH keys share a hash: distinct plain values almost never
    do, while a table of n keys with one hash costs n**2. Duplicates and unhashables are refused."""
    try:
        hashes = sorted(hash(k) for k in keys)
    except TypeError:
        raise WireError(f"unhashable {what}") from None
    run = 1
    for a, b in zip(hashes, hashes[1:]):
        run = run + 1 if a == b else 1
        if run > MAX_SAME_HASH:
            raise WireError(f"more than {MAX_SAME_HASH} keys with one hash value")
    out = {}
    for k, v in zip(keys, values):
        if k in out:
            raise WireError(f"duplicate {what}")
        out[k] = v
    return out


def _hashing(budget, n):
    budget[1] -= n
    if budget[1] < 0:
        raise TooLarge("more set members and dict keys than this decoder's budget")


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
        obj = json.loads(line, object_pairs_hook=_small_object, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, RecursionError, UnicodeDecodeError):
        raise WireError("malformed message") from None
    if type(obj) is not dict:
        raise WireError("malformed message")
    return obj


def _no_constant(name):
    raise WireError("malformed message")   # NaN/Infinity: not JSON, and not re-sendable (allow_nan=False)


def _finite(text):
    x = float(text)
    if x != x or x in (float("inf"), float("-inf")):   # 1e400
        raise WireError("malformed message")
    return x


def _small_object(pairs):
    # Checked before the dict is built: a line of many keys never becomes a table here.
    if len(pairs) > MAX_OBJECT_KEYS:
        raise WireError("malformed message")
    return dict(pairs)
