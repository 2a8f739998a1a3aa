"""Tests the trusted parent decides alone: `assert f(<literals>) <op> <literals>`.

When every test is one assert holding exactly one call of a solution callable, with literal
arguments, and the rest of the assertion is literals, comparisons, arithmetic on numbers and a few
pure built-ins (abs, len, sorted, ...), no tests process is needed: the parent sends all calls to
the solution process at once, and evaluates each assertion itself over the returned values (fresh
built-in objects from wire.py) with the small evaluator below, which can do nothing else. This is
the common shape of MBPP, of generated tests and of most HumanEval `check` bodies, and it is the
cheapest path (one sandboxed process per judgement, no round trips per call).
"""

from __future__ import annotations

import ast
import math
import operator

VALUE = "__cidermill_value__"
_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
        ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
        ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_FUNCS = {"abs": abs, "len": len, "round": round, "sorted": sorted, "set": set, "frozenset": frozenset, "list": list,
          "tuple": tuple, "sum": sum, "min": min, "max": max, "float": float, "bool": bool, "isclose": math.isclose}
NUMBERS = (int, float, complex)


class Plan:
    """One test: the call to make, and the assertion to check on its value."""

    def __init__(self, source: str, fn: str, args: list, kwargs: dict, check: ast.expr):
        self.source, self.fn, self.args, self.kwargs, self.check = source, fn, args, kwargs, check

    def holds(self, value) -> tuple[bool, str]:
        try:
            ok = bool(evaluate(self.check, value))
        except Exception as exc:   # e.g. comparing a list with an int: the assertion fails
            return False, f"{type(exc).__name__}: {str(exc)[:200]}"
        return ok, "" if ok else f"AssertionError: the call returned {_short(value)}"


def plan(steps: list[tuple[str, str]], stubs: list[str], prelude: str) -> list[Plan] | None:
    """Plans for every test, or None when any step needs the tests process."""
    if prelude.strip() or not steps:
        return None
    plans = []
    for kind, src in steps:
        if kind != "test":
            return None
        p = _plan_one(src, set(stubs))
        if p is None:
            return None
        plans.append(p)
    return plans


def _plan_one(src: str, stubs: set[str]) -> Plan | None:
    tree = ast.parse(src)
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
        return None
    test = tree.body[0].test
    calls = [n for n in ast.walk(test) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id in stubs]
    if len(calls) != 1:
        return None
    call = calls[0]
    try:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        args = [ast.literal_eval(a) for a in call.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    check = _Replace(call).visit(test)
    if not _allowed(check):
        return None
    return Plan(src, call.func.id, args, kwargs, check)


class _Replace(ast.NodeTransformer):
    def __init__(self, call: ast.Call):
        self.call = call

    def visit_Call(self, node):
        if node is self.call:
            return ast.Name(VALUE, ast.Load())
        return self.generic_visit(node)


def _allowed(node: ast.AST) -> bool:
    module_names = {id(n.value) for n in ast.walk(node) if _is_math_isclose(n)}   # the `math` of math.isclose
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            if n.id != VALUE and n.id not in _FUNCS and id(n) not in module_names:
                return False
        elif isinstance(n, ast.Call):
            if not (isinstance(n.func, ast.Name) and n.func.id in _FUNCS) and not _is_math_isclose(n.func):
                return False
        elif isinstance(n, ast.Attribute):
            if not _is_math_isclose(n):
                return False
        elif isinstance(n, ast.BinOp):
            if type(n.op) not in _BIN:
                return False
        elif not isinstance(n, (ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.UnaryOp, ast.BoolOp,
                                ast.Compare, ast.Load, ast.keyword, ast.USub, ast.UAdd, ast.Not, ast.And, ast.Or,
                                *_BIN, *_CMP)):
            return False
    return True


def _is_math_isclose(n) -> bool:
    return isinstance(n, ast.Attribute) and n.attr == "isclose" and isinstance(n.value, ast.Name) \
        and n.value.id == "math"


def evaluate(n: ast.AST, value):
    """The assertion over plain values: literals, the call's value, and nothing that could run
    code, touch the host or build something huge (no `**`; `*` and `%` only between numbers)."""
    if isinstance(n, ast.Name):
        return value if n.id == VALUE else _FUNCS[n.id]
    if isinstance(n, ast.Constant):
        return n.value
    if isinstance(n, (ast.Tuple, ast.List, ast.Set)):
        items = [evaluate(e, value) for e in n.elts]
        return {ast.Tuple: tuple, ast.List: list, ast.Set: set}[type(n)](items)
    if isinstance(n, ast.Dict):
        return {evaluate(k, value): evaluate(v, value) for k, v in zip(n.keys, n.values)}
    if isinstance(n, ast.UnaryOp):
        x = evaluate(n.operand, value)
        if isinstance(n.op, ast.Not):
            return not x
        if not isinstance(x, NUMBERS):
            raise TypeError("unary +/- on a non-number")
        return -x if isinstance(n.op, ast.USub) else +x
    if isinstance(n, ast.BinOp):
        a, b = evaluate(n.left, value), evaluate(n.right, value)
        if isinstance(n.op, (ast.Mult, ast.Mod)) and not (isinstance(a, NUMBERS) and isinstance(b, NUMBERS)):
            raise TypeError("* and % only between numbers here")   # no "x" * 10**9, no "%0999999999d" % 1
        return _BIN[type(n.op)](a, b)
    if isinstance(n, ast.BoolOp):
        result = isinstance(n.op, ast.And)
        for e in n.values:
            result = evaluate(e, value)
            if bool(result) != isinstance(n.op, ast.And):
                return result
        return result
    if isinstance(n, ast.Compare):
        left = evaluate(n.left, value)
        for op, right_node in zip(n.ops, n.comparators):
            right = evaluate(right_node, value)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(n, ast.Call):
        fn = math.isclose if isinstance(n.func, ast.Attribute) else _FUNCS[n.func.id]
        return fn(*[evaluate(a, value) for a in n.args], **{k.arg: evaluate(k.value, value) for k in n.keywords})
    raise TypeError(f"not allowed: {type(n).__name__}")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
