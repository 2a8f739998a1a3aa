"""Repository license detection and the permissive-license decision.

A repository's license comes from, in order of trust:
1. its license files (LICENSE*, LICENCE*, COPYING*, UNLICENSE, COPYRIGHT*, PATENTS at the root and
   REUSE-style LICENSES/*), each matched as a whole text (license_match);
2. the "License" section of its README when there is no license file;
3. SPDX tags and license notices in source-file headers, which also refine a bare license text
   (the GPL text alone does not say "or later"; `Released under the GNU GPLv2+` does).

Several distinct licenses in separate files give `A AND B` (the conservative reading: every file
may be under any of them), unless one file itself says how they combine (`mit OR unlicense`).
"""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable

from .license_index import LicenseIndex, load_index
from .license_match import join_expressions, match_text, phrase_matches, spdx_tags
from .license_text import words

UNKNOWN = "unknown"  # a license file exists but matches no known text, or nothing was found

# The report's permissive set (MIT, Apache, BSD, CC0, CC-BY, Unlicense, ISC, Artistic) as SPDX globs.
PERMISSIVE = ["MIT", "MIT-0", "Apache-1.0", "Apache-1.1", "Apache-2.0", "BSD-1-Clause", "BSD-2-Clause",
              "BSD-2-Clause-*", "BSD-3-Clause", "BSD-3-Clause-*", "0BSD", "CC0-1.0", "CC-BY-[0-9]*",
              "Unlicense", "ISC", "Artistic-1.0*", "Artistic-2.0"]

_LICENSE_NAME = re.compile(r"^(?:un)?licen[cs]e|^copying|^copyright|^patents(?:\.|$)", re.IGNORECASE)
_CODE_SUFFIX = re.compile(r"\.(py|js|ts|rb|go|java|c|h|cc|cpp|hpp|rs|php|pl|sh|swift|m|kt|scala|cs|json|ya?ml|"
                          r"toml|xml|svg|png|jpe?g|gif|lock|cfg|ini)$", re.IGNORECASE)
_README = re.compile(r"^readme(\.(md|markdown|rst|txt|adoc|org))?$", re.IGNORECASE)
_HEADING = re.compile(r"^(#{1,6})\s*(.+?)\s*#*\s*$|^(.+)\n(=+|-+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Evidence:
    path: str
    expression: str
    method: str
    score: float


@dataclass
class Detection:
    expression: str  # SPDX expression, or `unknown`
    status: str  # matched | unmatched (license file, no known text) | none (no license information)
    evidence: list[Evidence] = field(default_factory=list)


def is_license_file(path: str) -> bool:
    parts = path.split("/")
    if len(parts) == 2 and parts[0].lower() in ("licenses", "license", "licences"):
        return not _CODE_SUFFIX.search(parts[1])
    return len(parts) == 1 and bool(_LICENSE_NAME.match(parts[0])) and not _CODE_SUFFIX.search(parts[0])


def readme_license_section(text: str) -> str | None:
    """The body under a heading that names the license (Markdown `#` or underlined), if any."""
    heads = [(m.start(), m.end(), len(m.group(1)) if m.group(1) else (1 if m.group(4)[0] == "=" else 2),
              m.group(2) or m.group(3)) for m in _HEADING.finditer(text)]
    for i, (_, end, level, title) in enumerate(heads):
        if re.search(r"licen[cs]", title, re.IGNORECASE):
            stop = next((s for s, _, lv, _ in heads[i + 1:] if lv <= level), len(text))
            return text[end:stop]
    return None


def header_licenses(text: str, index: LicenseIndex, *, max_chars: int = 3000) -> list[str]:
    """SPDX tags, else license notices, in the first lines of a source file."""
    head = text[:max_chars]
    tags = spdx_tags(index, head)
    if tags:
        return tags
    return [e for _, _, e in phrase_matches(index, words(head, strip_copyright=False))]


def _refine(expression: str, header_exprs: Counter) -> str:
    """`GPL-2.0-only` -> `GPL-2.0-or-later` when the headers say "or later" for the same license."""
    for expr in header_exprs:
        if expr.endswith("-or-later"):
            only = expr[: -len("-or-later")] + "-only"
            expression = re.sub(rf"(?<![\w.-]){re.escape(only)}(?![\w.-])", expr, expression)
    return expression


def detect_repository(paths: Iterable[str], read: Callable[[str], str], *, index: LicenseIndex | None = None,
                      source_paths: Iterable[str] = (), max_headers: int = 30) -> Detection:
    """Detect the license of a repository given its file paths (relative, `/`-separated) and a reader.

    `source_paths` are code files whose headers are checked (at most `max_headers` of them).
    """
    index = index or load_index()
    paths = sorted(paths)
    evidence: list[Evidence] = []
    components: list[str] = []
    for path in filter(is_license_file, paths):
        text = read(path)
        if not text.strip():
            components.append(UNKNOWN)  # an empty license file: intent without terms
            evidence.append(Evidence(path, UNKNOWN, "empty", 0.0))
            continue
        if not words(text):
            continue  # only copyright lines: a notice, not a license
        m = match_text(text, index=index)
        expr = m.expression if m else UNKNOWN
        components.append(expr)
        evidence.append(Evidence(path, expr, m.method if m else "unmatched", m.score if m else 0.0))
    if not components:
        for path in filter(lambda p: _README.match(p), paths):
            section = readme_license_section(read(path))
            m = match_text(section, index=index) if section else None
            if m:
                components.append(m.expression)
                evidence.append(Evidence(path, m.expression, "readme_" + m.method, m.score))
    headers: Counter = Counter()
    for path in list(source_paths)[:max_headers]:
        found = header_licenses(read(path), index)
        if found:
            expr = join_expressions(found)
            headers[expr] += 1
            evidence.append(Evidence(path, expr, "header", 1.0))
    if not components and headers:
        components.append(headers.most_common(1)[0][0])
    components = _lgpl3_with_gpl3(list(dict.fromkeys(components)))
    if not components:
        return Detection(UNKNOWN, "none", evidence)
    expression = _refine(join_expressions(components), headers)
    status = "unmatched" if expression == UNKNOWN else "matched"
    return Detection(expression, status, evidence)


def _lgpl3_with_gpl3(components: list[str]) -> list[str]:
    """LGPL-3.0 is written as additions to the GPL-3.0, so projects ship both texts: that is LGPL-3.0."""
    if any(c.startswith("LGPL-3.0") for c in components):
        return [c for c in components if not c.startswith("GPL-3.0")]
    return components


# --- SPDX expressions -------------------------------------------------------------------------

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


def is_allowed(expr: str, allow: list[str]) -> bool:
    """OR: any branch allowed; AND: every part; `X WITH exception`: X allowed. `unknown` never is."""
    def ok(node) -> bool:
        if isinstance(node, str):
            return node != UNKNOWN and any(fnmatch.fnmatchcase(node, pat) for pat in allow)
        op, items = node
        if op == "OR":
            return any(ok(i) for i in items)
        if op == "AND":
            return all(ok(i) for i in items)
        return ok(items[0])  # WITH

    return ok(parse_expression(expr))

