"""What the tests' names mean: only the entry points come from the solution.

The rule: a name in the tests means what it means in a fresh interpreter that ran the trusted
prelude and the tests themselves (a builtin, or whatever the prelude or the tests bind), except the
entry points, which are the solution's. Nothing the solution defines, imports or mutates changes
that: its `def abs`, `len = ...`, `from math import fabs as abs` or `builtins.abs = ...` stay in
its own process, and the tests process (where the solution never ran) binds a solution name only
as a stub for an entry point.

Entry points are the task's (`entry_points=[...]`), or, when the task names none, the solution's
top-level callables that the tests use and that nothing else binds: names that are *free* in the
tests (a NameError in a fresh interpreter), so supplying them changes no name that had a meaning.

One convenience stays: tests may lean on the solution's plain `import math` for a free name
`math` (the module itself, imported fresh in the tests process; an alias or a `from` import is
the solution choosing what a name means, so it does not cross).
"""

from __future__ import annotations

import ast
import builtins
import symtable
import threading

FRESH = frozenset(dir(builtins)) | {"__builtins__", "__name__", "__doc__", "__file__", "__spec__", "__loader__",
                                   "__package__", "__annotations__"}


_PARSE_LOCK = threading.RLock()  # re-entrant: a finalizer run inside a parse may parse too


def parse_source(source: str, mode: str = "exec") -> ast.AST:
    """`ast.parse`, one caller at a time, retried once on CPython 3.11's spurious "AST constructor recursion
    depth mismatch" SystemError (python/cpython#106905): the AST builder keeps one depth counter per
    interpreter, so a parse running in another thread while ours builds its nodes trips our check. Seen once
    in a full test run (HumanEval's asserts); other errors, SyntaxError included, pass through."""
    with _PARSE_LOCK:
        try:
            return ast.parse(source, mode=mode)
        except SystemError as err:
            if "recursion depth mismatch" not in str(err):
                raise
            return ast.parse(source, mode=mode)


def parse(source: str) -> ast.Module:
    try:
        return parse_source(source)
    except (SyntaxError, ValueError):
        return ast.Module(body=[], type_ignores=[])


def used(steps: list[tuple[str, str]]) -> set[str]:
    """Every global name the tests read: at top level, and in helpers, classes and comprehensions
    (a helper's parameters and locals are its own, not the solution's)."""
    names = set()
    for _, src in steps:
        try:
            names |= _globals_read(symtable.symtable(src, "tests", "exec"))
        except (SyntaxError, ValueError):
            names |= {n.id for n in ast.walk(parse(src)) if isinstance(n, ast.Name)}
    return names


def _globals_read(table: symtable.SymbolTable) -> set[str]:
    top = table.get_type() == "module"
    names = {s.get_name() for s in table.get_symbols() if s.is_referenced() and (top or s.is_global())}
    for child in table.get_children():
        names |= _globals_read(child)
    return names


def bound(sources: list[str]) -> set[str]:
    """Names the trusted code binds at module level: assignments, def/class, imports, and `global`
    names assigned in a function. A star import's names are not known here (nothing is imported in
    the parent): the tests process installs an inferred stub only where a name is still unbound after
    the prelude, and the tests' own statements run after the stubs, so theirs win."""
    names = set()
    for src in sources:
        try:
            table = symtable.symtable(src, "trusted", "exec")
        except (SyntaxError, ValueError):
            continue
        names |= {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
        names |= _globals_assigned_below(table)
    return names


def _globals_assigned_below(table: symtable.SymbolTable) -> set[str]:
    names = set()
    for child in table.get_children():
        names |= {s.get_name() for s in child.get_symbols() if s.is_declared_global() and s.is_assigned()}
        names |= _globals_assigned_below(child)
    return names


def callables(tree: ast.Module) -> set[str]:
    """The solution's top-level def/class names and `name = lambda/other name/attribute`."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.Lambda, ast.Name, ast.Attribute)):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def free(steps: list[tuple[str, str]], prelude: str) -> set[str]:
    """Names the tests use that a fresh interpreter running the prelude and the tests leaves unbound."""
    return used(steps) - FRESH - bound([prelude, *(src for _, src in steps)])


def entry_points(solution: str, steps: list[tuple[str, str]], prelude: str) -> list[str]:
    """When the task names none: the solution's callables among the tests' free names."""
    return sorted(callables(parse(solution)) & free(steps, prelude))


def reference_entry_points(reference: str, tests: str | list[str], prelude: str = "") -> list[str]:
    """A task's entry points read off its trusted reference solution (MBPP's `code`): the reference's
    callables that the tests use and the tests and prelude do not bind, a builtin's name included
    (MBPP/126's entry point is `sum`). Give these as `entry_points`, so a solution cannot add more."""
    steps = [("test", tests)] if isinstance(tests, str) else [("test", t) for t in tests]
    return sorted(callables(parse(reference)) & used(steps) - bound([prelude, *(src for _, src in steps)]))


def modules_for_tests(solution: str, steps: list[tuple[str, str]], prelude: str, stubs: list[str]) -> list[str]:
    """Modules the solution imports plainly (`import math`, `import os.path`) whose top-level name
    is free in the tests: the tests process imports them itself (the standard library only)."""
    wanted = free(steps, prelude) - set(stubs)
    out = []
    for node in parse(solution).body:
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.asname is None and a.name.split(".")[0] in wanted]
    return sorted(set(out))
