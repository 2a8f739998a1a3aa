"""Tests the trusted parent decides alone: `assert f(<literals>) <op> <literals>`.

When every test is one assert holding exactly one call of a solution callable, with literal
arguments, and the rest of the assertion is literals, comparisons, arithmetic on numbers and a few
pure built-ins (abs, len, sorted, ...), no tests process is needed: the parent sends all calls to
the solution process at once, and evaluates each assertion itself over the returned values (fresh
built-in objects from wire.py) with the small evaluator below, which can do nothing else. This is
the common shape of MBPP, of generated tests and of most HumanEval `check` bodies, and it is the
cheapest path (one sandboxed process per judgement, no round trips per call).

The parent's own work on a returned value is bounded: it decodes at most PARENT_NODES nodes and
PARENT_HASHED set members and dict keys (whose hashes the solution chooses: n colliding keys cost
n**2), and the evaluator charges every operation over the value (sorting, summing, building a set)
against PARENT_WORK elements and PARENT_HASHED keys. A value past any of these raises TooLarge, and
judge.py has that assertion checked in the sandboxed tests process instead, under its time limit.
"""

from __future__ import annotations

import ast
import math
import operator

from .names import parse_source
from .wire import TooLarge

VALUE = "__cidermill_value__"
# What evaluate() means by `math` and `isclose`, for the tests process when it checks a value instead.
EVALUATOR_PRELUDE = "import math\nfrom math import isclose\n"
PARENT_NODES = 20_000        # nodes of one returned value the parent decodes itself
PARENT_HASHED = 1_024        # set members and dict keys the parent hashes for one test (decode + evaluation)
PARENT_WORK = 200_000        # elements the evaluator's sorts, sums, copies and sets may touch for one test
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

    def assertion(self) -> str:
        """The check as Python over the name VALUE: what the tests process runs when the value is
        too costly to check here."""
        return "assert " + ast.unparse(self.check)

    def holds(self, value) -> tuple[bool, str]:
        """Whether the assertion holds for `value`; raises TooLarge when checking it here would cost
        more than the parent's budget (the caller has the sandbox check it instead)."""
        try:
            ok = bool(evaluate(self.check, value, _Budget()))
        except TooLarge:
            raise
        except Exception as exc:   # e.g. comparing a list with an int: the assertion fails
            return False, f"{type(exc).__name__}: {str(exc)[:200]}"
        return ok, "" if ok else f"AssertionError: the call returned {_short(value)}"


def plan(steps: list[tuple[str, str]], stubs: list[str], prelude: str) -> list[Plan] | None:
    """Plans for every test, or None when any step needs the tests process (also when an entry
    point has the name of a builtin the evaluator knows: the tests process binds it as the stub)."""
    if prelude.strip() or not steps or set(stubs) & (set(_FUNCS) | {"math"}):
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
    tree = parse_source(src)
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


class _Budget:
    """What one test's evaluation may still touch (see the module's doc)."""

    def __init__(self):
        self.work, self.hashed = PARENT_WORK, PARENT_HASHED

    def charge(self, x, *, hashed: bool = False) -> None:
        n = len(x) if isinstance(x, (str, bytes, list, tuple, set, frozenset, dict)) else 1
        self.work -= n
        if hashed:
            self.hashed -= n
        if self.work < 0 or self.hashed < 0:
            raise TooLarge("checking this value would cost the parent more than its budget")


def evaluate(n: ast.AST, value, budget: _Budget):
    """The assertion over plain values: literals, the call's value, and nothing that could run
    code, touch the host or build something huge (no `**`; `*` and `%` only between numbers)."""
    if isinstance(n, ast.Name):
        return value if n.id == VALUE else _FUNCS[n.id]
    if isinstance(n, ast.Constant):
        return n.value
    if isinstance(n, (ast.Tuple, ast.List, ast.Set)):
        items = [evaluate(e, value, budget) for e in n.elts]
        if isinstance(n, ast.Set):
            budget.charge(items, hashed=True)
        return {ast.Tuple: tuple, ast.List: list, ast.Set: set}[type(n)](items)
    if isinstance(n, ast.Dict):
        budget.charge(n.keys, hashed=True)
        return {evaluate(k, value, budget): evaluate(v, value, budget) for k, v in zip(n.keys, n.values)}
    if isinstance(n, ast.UnaryOp):
        x = evaluate(n.operand, value, budget)
        if isinstance(n.op, ast.Not):
            return not x
        if not isinstance(x, NUMBERS):
            raise TypeError("unary +/- on a non-number")
        return -x if isinstance(n.op, ast.USub) else +x
    if isinstance(n, ast.BinOp):
        a, b = evaluate(n.left, value, budget), evaluate(n.right, value, budget)
        if isinstance(n.op, (ast.Mult, ast.Mod)) and not (isinstance(a, NUMBERS) and isinstance(b, NUMBERS)):
            raise TypeError("* and % only between numbers here")   # no "x" * 10**9, no "%0999999999d" % 1
        if not isinstance(a, NUMBERS):   # list + list copies both; set - set hashes into a new set
            budget.charge(a, hashed=isinstance(a, (set, frozenset)))
            budget.charge(b)
        return _BIN[type(n.op)](a, b)
    if isinstance(n, ast.BoolOp):
        result = isinstance(n.op, ast.And)
        for e in n.values:
            result = evaluate(e, value, budget)
            if bool(result) != isinstance(n.op, ast.And):
                return result
        return result
    if isinstance(n, ast.Compare):
        left = evaluate(n.left, value, budget)
        for op, right_node in zip(n.ops, n.comparators):
            right = evaluate(right_node, value, budget)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(n, ast.Call):
        fn = math.isclose if isinstance(n.func, ast.Attribute) else _FUNCS[n.func.id]
        args = [evaluate(a, value, budget) for a in n.args]
        kwargs = {k.arg: evaluate(k.value, value, budget) for k in n.keywords}
        for a in args:   # sorted/sum/min/max/list/tuple walk their argument; set/frozenset hash it
            budget.charge(a, hashed=fn in (set, frozenset))
        if fn is sum and not all(isinstance(a, NUMBERS) for a in [*args[1:], *kwargs.values()]):
            raise TooLarge("sum() with a non-number start (quadratic concatenation) is not checked here")
        return fn(*args, **kwargs)
    raise TypeError(f"not allowed: {type(n).__name__}")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
