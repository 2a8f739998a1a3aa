"""SPDX license expressions: parsing, normalising, combining and the keep/drop decision.

Parsing and rendering go through `license-expression` (the SPDX expression grammar with ScanCode's
key index: `gpl-2.0+` -> `GPL-2.0-or-later`, `mit` -> `MIT`, `WITH` exceptions). Semantics:
- `A OR B`: the user may choose; the code is usable when *some* alternative is usable;
- `A AND B`: both apply; usable only when each is;
- `A WITH E`: license A with an SPDX exception (those grant extra permissions), decided by A; a
  LicenseDB `LicenseRef-` "exception" (the Commons Clause is filed as one) is not trusted.

Markers the detector adds as conjuncts (never in an allow list, so they make the alternative they
sit in unusable): restrictive terms found in a license text (`LicenseRef-cidermill-non-commercial`,
...) and `LicenseRef-cidermill-ambiguous` for evidence the detector cannot resolve.
"""

from __future__ import annotations

import fnmatch
import re
from functools import lru_cache

UNKNOWN = "unknown"
AMBIGUOUS = "LicenseRef-cidermill-ambiguous"
MARKER_PREFIX = "LicenseRef-cidermill-"

# Ids a glob like `BSD-3-Clause-*` would catch but whose text limits the field of use: only allowed
# when listed by name.
_FIELD_OF_USE_IDS = re.compile(r"^BSD-3-Clause-No-(?:Military-License|Nuclear-License)")

# The report's permissive set (MIT, Apache, BSD, CC0, CC-BY, Unlicense, ISC, Artistic) as SPDX globs.
PERMISSIVE = ["MIT", "MIT-0", "Apache-1.0", "Apache-1.1", "Apache-2.0", "BSD-1-Clause", "BSD-2-Clause",
              "BSD-2-Clause-*", "BSD-3-Clause", "BSD-3-Clause-*", "0BSD", "CC0-1.0", "CC-BY-[0-9]*",
              "Unlicense", "ISC", "Artistic-1.0*", "Artistic-2.0"]


@lru_cache(maxsize=1)
def licensing():
    from license_expression import get_spdx_licensing

    return get_spdx_licensing()


@lru_cache(maxsize=65536)
def _parsed(expr: str):
    try:
        return licensing().parse(expr, validate=False, simple=False)
    except Exception:  # ExpressionError and friends: not an expression
        return None


def parse_ok(expr: str) -> bool:
    return bool(expr and expr.strip()) and _parsed(expr) is not None


def normalize(expr: str) -> str:
    """Canonical SPDX rendering (`mit or apache-2.0` -> `MIT OR Apache-2.0`); `unknown` stays."""
    if not expr or expr.strip().lower() == UNKNOWN:
        return UNKNOWN
    node = _parsed(expr)
    return node.render() if node is not None else expr.strip()


def known_ids(expr: str) -> list[str]:
    """Unknown license keys in a parsed expression (not SPDX ids, not LicenseRef-*)."""
    node = _parsed(expr)
    if node is None:
        return [expr]
    return [k for k in licensing().unknown_license_keys(node) if not k.startswith("LicenseRef-")]


def ids(expr: str) -> set[str]:
    """License and exception ids named in an expression (markers included)."""
    node = _parsed(expr)
    if node is None:
        return {UNKNOWN}
    return {s.key for s in licensing().license_symbols(node, decompose=True)}


def _group(expr: str) -> str:
    return f"({expr})" if " " in expr.strip() else expr


def join(exprs, op: str) -> str:
    """Distinct expressions joined with `OR`/`AND` (first-seen order), normalised."""
    uniq = list(dict.fromkeys(e for e in exprs if e))
    if not uniq:
        return UNKNOWN
    if len(uniq) == 1:
        return normalize(uniq[0])
    joined = f" {op} ".join(_group(e) for e in uniq)
    node = _parsed(joined)
    return node.simplify().render() if node is not None else joined


def is_allowed(expr: str, allow: list[str]) -> bool:
    """Is some alternative of `expr` fully inside `allow` (SPDX ids or globs)? `unknown` never is."""
    if not expr or expr.strip().lower() == UNKNOWN:
        return False
    node = _parsed(expr)
    if node is None:
        return False
    from license_expression import LicenseSymbol, LicenseWithExceptionSymbol

    lic = licensing()

    def ok(n) -> bool:
        if isinstance(n, LicenseWithExceptionSymbol):  # SPDX exceptions grant more; LicenseDB also files
            return ok(n.license_symbol) and not n.exception_symbol.key.startswith("LicenseRef-")  # Commons Clause
        if isinstance(n, LicenseSymbol):
            key = n.key
            if key.startswith(MARKER_PREFIX):
                return False
            if key in allow:
                return True
            return not _FIELD_OF_USE_IDS.match(key) and any(fnmatch.fnmatchcase(key, p) for p in allow)
        if isinstance(n, lic.OR):
            return any(ok(a) for a in n.args)
        if isinstance(n, lic.AND):
            return all(ok(a) for a in n.args)
        return False

    return ok(node)


def same_expression(a: str, b: str) -> bool:
    """Equal as SPDX expressions (operand order and grouping do not matter)."""
    if normalize(a) == normalize(b):
        return True
    na, nb = _parsed(a), _parsed(b)
    if na is None or nb is None:
        return False
    return na.simplify() == nb.simplify()


def has_marker(expr: str, marker: str = MARKER_PREFIX) -> bool:
    return marker in (expr or "")


# --- the project's own small grammar, kept for callers that want a plain tree ---------------------

_TOKEN = re.compile(r"\(|\)|[A-Za-z0-9][A-Za-z0-9.+\-_:]*")


def parse_expression(expr: str):
    """`A OR (B AND C)` -> ('OR', ['A', ('AND', ['B', 'C'])]); `X WITH E` -> ('WITH', ['X', 'E'])."""
    tokens = _TOKEN.findall(expr)
    pos = 0

    def parse_or():
        nonlocal pos
        items = [parse_and()]
        while pos < len(tokens) and tokens[pos].upper() == "OR":
            pos += 1
            items.append(parse_and())
        return items[0] if len(items) == 1 else ("OR", items)

    def parse_and():
        nonlocal pos
        items = [parse_with()]
        while pos < len(tokens) and tokens[pos].upper() == "AND":
            pos += 1
            items.append(parse_with())
        return items[0] if len(items) == 1 else ("AND", items)

    def parse_with():
        nonlocal pos
        base = parse_atom()
        if pos < len(tokens) and tokens[pos].upper() == "WITH":
            pos += 1
            return ("WITH", [base, parse_atom()])
        return base

    def parse_atom():
        nonlocal pos
        if pos >= len(tokens):
            return UNKNOWN
        tok = tokens[pos]
        pos += 1
        if tok == "(":
            node = parse_or()
            if pos < len(tokens) and tokens[pos] == ")":
                pos += 1
            return node
        return tok

    return parse_or() if tokens else UNKNOWN
