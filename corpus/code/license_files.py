"""Which license covers each file of a repository: the file's own statement first, then REUSE, then its
folder, then what the repository's license files say.

In order (REUSE 3.x semantics where REUSE speaks):
1. `SPDX-License-Identifier:` tags in the file's first lines, or in its `<file>.license` sidecar;
2. `REUSE.toml` annotations (the last one matching the path; `precedence = "override"` beats 1,
   `"aggregate"` is AND-ed with it, `"closest"`, the default, applies when 1 says nothing) and
   `.reuse/dep5` paragraphs (the last `Files:` match, aggregated with 1);
3. the nearest license file in a folder above the file (`lib/LICENSE`, `tsl/LICENSE-TIMESCALE`,
   `vendor/x/LICENSE`);
4. an artifact license for an artifact file (fonts under the font license, `docs/` under the
   documentation license: license_scope.py);
5. the repository's license (license.py `detect_repository`).
For 3-5, a license notice in the file's leading comment that names a license outside the permissive
set and outside the expression chosen ("Distributed under the GNU LGPL 3.0" in an MIT repository) is
AND-ed in: a notice can make a file stricter, never looser.
"""

from __future__ import annotations

import posixpath
import re
import tomllib
from dataclasses import dataclass

from .license import Detection
from .license_expr import PERMISSIVE, UNKNOWN, ids, is_allowed, join, known_ids, normalize, parse_ok
from .license_file import statement_expression
from .license_index import LicenseIndex
from .license_match import spdx_tags
from .license_roles import covered_folder
from .license_scope import CODE_EXTENSIONS, path_kind, scope_paths

HEAD_CHARS = 4000  # where a file's SPDX tags and license notice are looked for
_COMMENT = re.compile(r"^\s*(?:#|//|/\*|\*|--|;|%|<!--|\"\"\"|'''|\(\*|{-|REM\b|@rem\b|!)", re.IGNORECASE)
_STATES = re.compile(r"\b(?:licen[cs]ed|released|distributed|available|provided)\s+(?:\w+\s+){0,3}?under\b|"
                     r"\bunder\s+the\s+terms\s+of\b", re.IGNORECASE)


@dataclass(frozen=True)
class FileLicense:
    expression: str
    rule: str  # spdx-header | reuse-sidecar | reuse-toml | dep5 | folder | artifact | repository (+notice)
    source: str  # what decided: the file itself, `REUSE.toml[2]`, `lib/LICENSE`, `LICENSE`, ...


@dataclass(frozen=True)
class _Annotation:
    pattern: re.Pattern
    expression: str
    precedence: str  # closest | aggregate | override
    source: str


def _tags(text: str, index: LicenseIndex) -> str | None:
    """The SPDX expressions tagged in `text`, AND-ed; None when there is none (or none parses)."""
    found = [t for t in spdx_tags(index, text) if parse_ok(t) and not known_ids(t)]
    return join(list(dict.fromkeys(found)), "AND") if found else None


def _toml_glob(pattern: str) -> re.Pattern:
    """REUSE.toml globs: `*` within a folder, `**` across folders, `\\*` a literal star."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("\\*", i):
            out.append(re.escape("*"))
            i += 2
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def _dep5_glob(pattern: str) -> re.Pattern:
    """Debian copyright globs: `*` matches anything, `/` included; `?` one character."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern) + r"\Z")


def _reuse_toml(text: str, index: LicenseIndex) -> list[_Annotation]:
    data = tomllib.loads(text)
    out = []
    for n, ann in enumerate(data.get("annotations", []) if isinstance(data, dict) else []):
        if not isinstance(ann, dict):
            continue
        lic = ann.get("SPDX-License-Identifier")
        exprs = [lic] if isinstance(lic, str) else [x for x in lic or [] if isinstance(x, str)]
        exprs = [normalize(e) for e in exprs if parse_ok(e)]
        paths = ann.get("path")
        paths = [paths] if isinstance(paths, str) else [p for p in paths or [] if isinstance(p, str)]
        if exprs and paths:
            expr = join(exprs, "AND")
            for p in paths:
                out.append(_Annotation(_toml_glob(p), expr, str(ann.get("precedence", "closest")),
                                       f"REUSE.toml[{n}]"))
    return out


def _dep5(text: str) -> list[_Annotation]:
    out = []
    for n, para in enumerate(re.split(r"\n\s*\n", text)):
        files = re.search(r"^Files:\s*((?:.*)(?:\n[ \t]+.*)*)", para, re.MULTILINE)
        lic = re.search(r"^License:\s*(.+)$", para, re.MULTILINE)
        if not files or not lic or not parse_ok(lic.group(1).strip()):
            continue
        for pat in files.group(1).split():
            out.append(_Annotation(_dep5_glob(pat), normalize(lic.group(1).strip()), "aggregate", f".reuse/dep5[{n}]"))
    return out


class RepositoryLicenses:
    """Per-file decisions for one repository: built from its detection and its license inputs (path -> text)."""

    def __init__(self, detection: Detection, inputs: dict[str, str], index: LicenseIndex):
        self.detection, self.index = detection, index
        self.problems: list[str] = []  # REUSE files that do not parse: recorded, the rest decides
        self.annotations: list[_Annotation] = []
        if "REUSE.toml" in inputs:
            try:
                self.annotations += _reuse_toml(inputs["REUSE.toml"], index)
            except (tomllib.TOMLDecodeError, TypeError, ValueError) as exc:
                self.problems.append(f"REUSE.toml: {type(exc).__name__}: {str(exc)[:80]}")
        if ".reuse/dep5" in inputs:
            self.annotations += _dep5(inputs[".reuse/dep5"])
        self.sidecars = {p[: -len(".license")]: t for p, t in inputs.items() if p.endswith(".license")}
        # folder licenses, deepest first, a license file before a statement about the same folder:
        # (folder or file, expression, what says so); a folder license we cannot read still governs its folder
        folders = [(covered_folder(e.path), e.expression, e.path, 0) for e in detection.evidence
                   if e.role in ("directory", "bundled") and "/" in e.path]
        folders += [(p, expr, "statement", 1) for scope, expr in detection.scoped.items() for p in scope_paths(scope)]
        self.folders = [f[:3] for f in sorted(folders, key=lambda f: (-f[0].count("/"), f[3]))]

    def for_file(self, path: str, head: str) -> FileLicense:
        """The license of one file, from its path and its first characters."""
        head = head[:HEAD_CHARS]
        own = _tags(head, self.index)
        rule, source = ("spdx-header", path) if own else ("", "")
        if own is None and path in self.sidecars:
            own = _tags(self.sidecars[path], self.index)
            rule, source = ("reuse-sidecar", path + ".license") if own else ("", "")
        ann = next((a for a in reversed(self.annotations) if a.pattern.match(path)), None)
        if ann is not None:
            rule_name = "reuse-toml" if ann.source.startswith("REUSE") else "dep5"
            if own is None or ann.precedence == "override":
                return FileLicense(ann.expression, rule_name, ann.source)
            if ann.precedence == "aggregate":
                return FileLicense(join([own, ann.expression], "AND"), f"{rule}+{rule_name}", f"{source}, {ann.source}")
        if own is not None:
            return FileLicense(own, rule, source)
        return self._with_notice(self._inherited(path), path, head)

    def _inherited(self, path: str) -> FileLicense:
        for folder, expr, source in self.folders:
            if folder and (path.startswith(folder + "/") or path == folder):
                return FileLicense(expr, "folder", source if source != "statement" else f"a statement about {folder}")
        kind = path_kind(path, self.detection.scoped)
        if kind:
            return FileLicense(self.detection.scoped[kind], "artifact", f"{kind} license")
        deciding = [e.path for e in self.detection.evidence if e.decided]
        return FileLicense(self.detection.expression, "repository", ", ".join(deciding[:4]) or "none")

    def _with_notice(self, got: FileLicense, path: str, head: str) -> FileLicense:
        """AND a non-permissive license that a code file's leading comment states and `got` does not name."""
        if posixpath.splitext(path.lower())[1] not in CODE_EXTENSIONS | {""}:
            return got  # a document's first lines are not a license header (`# Title` in Markdown)
        comment = _leading_comment(head)
        # only the sentences that state a license ("Distributed under the GNU LGPL 3.0"), not the rest of the
        # comment ("based on the JSON Web Signature library")
        sentences = [s for s in re.split(r"(?<=[.;:!?])\s+|\n\s*\n", comment) if _STATES.search(s)]
        if not sentences:
            return got
        stated, _ = statement_expression(" ".join(sentences), self.index)
        if not stated:
            return got
        named = _bases(got.expression)
        extra = [i for i in ids(stated) if _base(i) not in named and not i.startswith("LicenseRef-cidermill-family")
                 and not is_allowed(i, PERMISSIVE) and i != UNKNOWN]
        if not extra:
            return got
        return FileLicense(join([got.expression] + extra, "AND"), got.rule + "+notice", got.source)


def _base(spdx_id: str) -> str:
    return re.sub(r"-(?:only|or-later)$", "", spdx_id)


def _bases(expr: str) -> set[str]:
    return {_base(i) for i in ids(expr)} if expr != UNKNOWN else set()


_CODE_LINE = re.compile(r"\s*(?:import|from|package|use|require|#include|#import|def|class|function|const|var|let|"
                        r"module|namespace|using|public|private|static|int|void|fn|pub|struct)\b")


def _leading_comment(head: str) -> str:
    """The comment block a file starts with (after a shebang or encoding line): its first code line ends it."""
    lines: list[str] = []
    for line in head.splitlines()[:80]:
        if line.startswith("#!") and not lines:
            continue
        if _CODE_LINE.match(line) and not _COMMENT.match(line):
            break
        if not lines and line.strip() and not _COMMENT.match(line):
            break  # the file does not start with a comment
        lines.append(line)
    return "\n".join(lines)


def decide_repository(inputs: dict, *, index: LicenseIndex, max_headers: int = 30) -> RepositoryLicenses:
    """The repository's license and its per-file rules, from the reader's `license_inputs` (license_inputs.py)."""
    from .license import detect_repository

    files, heads = inputs["files"], inputs["heads"]
    texts = {**heads, **files}
    det = detect_repository(sorted(texts), texts.__getitem__, index=index, source_paths=sorted(heads)[:max_headers])
    return RepositoryLicenses(det, files, index)
