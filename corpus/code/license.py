"""Repository license detection: evidence by role, combined as SPDX expressions.

Evidence and its role (license_roles.py says which file plays which):
- **own files**: license files at the root, each read as the license texts it holds and the prose
  around them (license_file.py). Separate own files are alternatives (`A OR B`), unless a statement
  among them says how they combine: a prose LICENSE that names the other files' licenses, or points
  to the files ("either of the licenses in LICENSE.APACHE or LICENSE.BSD"; "liblzma is 0BSD, getopt
  is LGPLv2.1+") decides, with its own choice words.
- **declared**: package metadata (license_meta) and the README's license section. When they name
  the licenses of the own files (or more), they say how those combine and decide; when they
  contradict the files, both apply (AND), and a contradiction that matters is `ambiguous`. An SPDX
  expression in metadata keeps its operators: `A AND B` is both. When the metadata and the license
  files agree, a README that names more licenses (a sub-project's, a dependency's) is recorded only.
- **headers**: SPDX tags and notices in source files; they decide only when nothing above does,
  and refine `-only` to `-or-later` ("Released under the GNU GPLv2+").
- **recorded, not deciding the repository's license**: REUSE `LICENSES/` texts (used, AND-ed, only when
  nothing else exists), license files inside folders (they decide their folder's files:
  license_files.py), bundled/third-party texts (THIRD-PARTY*, vendor/, third_party/, ...), licenses of
  non-code artifacts (LICENSE_weights, LICENSE-docs, "the model weights are CC BY-NC"; kept in
  `Detection.scoped`), and files such as `copyright-exclude`.

Uncertainty adds `LicenseRef-cidermill-ambiguous`. A statement that names licenses but leaves much
unexplained is ambiguous unless what it names is confirmed: by the texts it points to or sits beside,
by package metadata, or by the source headers, and every license name in it is a known one.
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable

from .license_expr import (AMBIGUOUS, MARKER_PREFIX, PERMISSIVE, UNKNOWN, ids, is_allowed, join, normalize,
                           parse_expression)
from .license_file import (FileReading, file_expression, name_expression, readme_statement, statement_expression,
                           with_restrictions, STATEMENT_CHARS)
from .license_index import LicenseIndex, load_index
from .license_match import phrase_matches, spdx_tags
from .license_meta import Declared, classifier_expression, cpan_expression, read_metadata
from .license_roles import README, artifact_kind, is_license_file, license_role, readme_license_section
from .license_scope import artifact_license_kind, split_scopes, without_artifact_clauses
from .license_text import words

__all__ = ["PERMISSIVE", "UNKNOWN", "AMBIGUOUS", "Detection", "Evidence", "detect_repository", "is_allowed",
           "is_license_file", "license_role", "name_expression", "parse_expression", "readme_license_section"]

_FAMILY = {"BSD": r"^(0?BSD-|BSD$)", "GPL": r"^GPL-", "LGPL": r"^LGPL-", "AFL": r"^AFL-",
           "public-domain": r"^(Unlicense|CC0-1\.0|LicenseRef-.*public-domain.*)$", "free": r"."}
_PUBLIC_DOMAIN = re.compile(r"^LicenseRef-scancode-public-domain(?:-disclaimer)?$")
_PATENTS = re.compile(r"^patents", re.IGNORECASE)
# a license named in words ("the Timescale License"): each must be one the index knows
_LICENSE_NAME = re.compile(r"\b((?:[A-Z][\w.+-]*\s+){1,5}(?:Public\s+)?(?:License|Licence|Agreement))\b")


@dataclass(frozen=True)
class Evidence:
    path: str
    expression: str
    method: str  # dice | cover | segments | phrase | spdx_tag | metadata:<field> | readme | header | ...
    score: float
    role: str = "own"  # own | declared | header | reuse | directory | bundled | artifact | other
    decided: bool = False


@dataclass
class Detection:
    expression: str  # SPDX expression of the repository's code, or `unknown`
    status: str  # matched | unmatched | none | ambiguous
    evidence: list[Evidence] = field(default_factory=list)
    how: str = ""  # which evidence decided and how
    scoped: dict[str, str] = field(default_factory=dict)  # artifact kind -> its license (not the code's)

    @property
    def whole(self) -> str:
        """The repository's code as a whole: the code's license AND what statements give named folders
        (an artifact's license, vendored folders' license files are not in it)."""
        parts = [self.expression] + [e for k, e in self.scoped.items() if k.startswith("path:")]
        return join(parts, "AND") if len(parts) > 1 and self.expression != UNKNOWN else self.expression

    def explain(self) -> str:
        """One line for the `license_evidence` column."""
        parts = [self.how] + [f"{e.path}{'*' if e.decided else ''}={e.expression} ({e.role}, {e.method}"
                              f"{f' {e.score:.2f}' if e.score not in (0.0, 1.0) else ''})" for e in self.evidence]
        parts += [(f"files under {kind[5:]}" if kind.startswith("path:") else f"{kind} (not the code)") + f"={expr}"
                  for kind, expr in self.scoped.items()]
        return "; ".join(p for p in parts if p)


# --- combining ------------------------------------------------------------------------------------

def _real_ids(expr: str) -> set[str]:
    return {i for i in ids(expr) if not i.startswith(MARKER_PREFIX) and i != UNKNOWN and not _PUBLIC_DOMAIN.match(i)}


def _families(expr: str) -> list[str]:
    fams = [i[len(MARKER_PREFIX + "family-"):] for i in ids(expr) if i.startswith(MARKER_PREFIX + "family-")]
    return fams + ["public-domain"] * any(_PUBLIC_DOMAIN.match(i) for i in ids(expr))


def _covers(declared: str, files: str) -> bool:
    """Does the declared expression name every license the files name (families count)?"""
    named = _real_ids(declared)
    fams = [_FAMILY[f] for f in _families(declared) if f in _FAMILY]
    return all(i in named or any(re.search(p, i) for p in fams) for i in _real_ids(files))


def _bases(expr: str) -> set[str]:
    """License ids without `-only`/`-or-later`: the text, not the version choice."""
    return {re.sub(r"-(?:only|or-later)$", "", i) for i in _real_ids(expr)}


def _same_licenses(a: str, b: str) -> bool:
    return bool(_bases(a)) and _bases(a) == _bases(b)


def _declared_expression(declared: list[Evidence], files: str | None) -> tuple[str | None, str, list[Evidence]]:
    """The declaration and the evidence it rests on. When the metadata and the license files name the same
    licenses, a README naming more is recorded, not deciding (its restrictive terms still hold)."""
    meta = [e for e in declared if e.method.startswith("metadata:") and e.expression != UNKNOWN]
    if meta and files and files != UNKNOWN and all(_same_licenses(e.expression, files) for e in meta):
        readme = [e for e in declared if e not in meta]
        terms = [i for e in readme for i in sorted(ids(e.expression)) if i.startswith(MARKER_PREFIX)
                 and "family-" not in i]
        declared = meta + [e for e in readme if terms]
        if terms:
            best, how, _ = _declared_expression(meta, None)
            return join([best] + terms, "AND"), how, declared
    exprs = [e.expression for e in declared if e.expression != UNKNOWN]
    if not exprs:
        return None, "", declared
    uniq = list(dict.fromkeys(normalize(e) for e in exprs))
    best = max(uniq, key=lambda e: (len(_real_ids(e)), -len(_families(e))))
    if all(_covers(best, e) for e in uniq):
        terms = [i for e in uniq for i in sorted(ids(e)) if i.startswith(MARKER_PREFIX) and "family-" not in i
                 and i not in ids(best)]  # a restriction said in one place holds whatever the others say
        return (join([best] + terms, "AND") if terms else best), "declared", declared
    both = join(uniq, "AND")  # metadata and README disagree: all of them apply
    return (both if is_allowed(both, PERMISSIVE) else join([both, AMBIGUOUS], "AND")), "declared-conflict", declared


def _lgpl3_with_gpl3(components: list[str]) -> list[str]:
    """LGPL-3.0 is written as additions to the GPL-3.0, so projects ship both texts: that is LGPL-3.0."""
    if any(c.startswith("LGPL-3.0") for c in components):
        return [c for c in components if not c.startswith("GPL-3.0")]
    return components


def _refine(expression: str, header_exprs: Counter) -> str:
    """`GPL-2.0-only` -> `GPL-2.0-or-later` when the headers say "or later" for the same license."""
    for expr in header_exprs:
        if expr.endswith("-or-later"):
            only = expr[: -len("-or-later")] + "-only"
            expression = re.sub(rf"(?<![\w.-]){re.escape(only)}(?![\w.-])", expr, expression)
    return expression


def header_licenses(text: str, index: LicenseIndex, *, max_chars: int = 3000) -> list[str]:
    """SPDX tags, else license notices, in the first lines of a source file."""
    head = text[:max_chars]
    tags = spdx_tags(index, head)
    if tags:
        return tags
    return [e for _, _, e in phrase_matches(index, words(head, strip_copyright=False))]


def _metadata_evidence(declared: list[Declared], index: LicenseIndex) -> list[Evidence]:
    out = []
    for d in declared:
        if d.kind == "classifier":
            vals = [classifier_expression(c) or name_expression(c.split("::")[-1], index) for c in d.values]
        elif d.kind == "cpan":
            vals = [cpan_expression(v) or UNKNOWN for v in d.values]
        else:
            vals = [name_expression(v, index) for v in d.values]
        vals = [v for v in vals if v != UNKNOWN]
        if vals:
            out.append(Evidence(d.path, join(vals, "OR"), f"metadata:{d.field}", 1.0, "declared"))
    return out


# --- statements among the license files -------------------------------------------------------------

def _unknown_names(text: str, index: LicenseIndex) -> list[str]:
    """License names in a statement that the index does not know ("the Timescale License")."""
    out = []
    for m in _LICENSE_NAME.finditer(text):
        name = m.group(1)
        if not statement_expression(name, index)[0]:
            out.append(name)
    return out


def _referenced(text: str, readings: dict[str, FileReading], own: str) -> list[str]:
    """Paths of license files a statement points to by name (`LICENSE.BSD`, `epl-v20`, `docs/FTL.TXT`). A
    name without an extension is matched as written ("the LICENSE file", not "the MIT license")."""
    out = []
    for path in readings:
        if path == own:
            continue
        # a file in a folder is named by its path ("docs/FTL.TXT"); "LICENSE" alone means a root file
        for name in dict.fromkeys([path] + ([posixpath.basename(path)] if "/" not in path else [])):
            flags = re.IGNORECASE if "." in name or "/" in name else 0
            if len(name) >= 4 and re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text, flags):
                out.append(path)
                break
    return out


def _statement_files(own: list[Evidence], readings: dict[str, FileReading], index: LicenseIndex,
                     confirmations: list[str], scoped: dict[str, list[str]]) -> tuple[list[Evidence], list[str]]:
    """Own files after statement files have spoken. A statement that points to other license files ("either
    of the licenses found in LICENSE.APACHE or LICENSE.BSD") stands for them, joined by its choice words; a
    file it points to from a clause about an artifact licenses that artifact. A statement that names the
    license of every other own file replaces them by what it says. Its ambiguity goes when it points to
    the texts, or what it names is confirmed (the metadata or the headers name the same licenses), and it
    names no license the index does not know."""
    out, notes = list(own), []
    for st in [e for e in own if e.method == "phrase" and e.path in readings]:
        reading = readings[st.path]
        code_prose, artifact_prose = split_scopes(reading.prose)
        refs = _referenced(code_prose, readings, st.path)
        for kind, clause in artifact_prose.items():
            for path in _referenced(clause, readings, st.path):
                if readings[path].expression not in (None, UNKNOWN) and path not in refs:
                    scoped.setdefault(kind, []).append(readings[path].expression)
                    out = [e for e in out if e.path != path]
        texts = [readings[p].expression for p in refs if readings[p].expression not in (None, UNKNOWN)]
        others = [e for e in out if e is not st and not _PATENTS.match(e.path) and e.expression != UNKNOWN]
        stated, named = st.expression, _bases(st.expression)
        if texts:  # the statement stands for the texts it points to
            stated = join(texts, "OR" if _offers_choice(code_prose) else "AND")
        governs = bool(texts) or bool(others) and all(_bases(e.expression) <= named for e in others)
        confirmed = bool(texts) or bool(named) and (
            governs or any(_bases(c) == named for c in confirmations))
        if AMBIGUOUS in ids(stated) and confirmed and not _unknown_names(reading.prose, index):
            stated = _without_ambiguity(stated)
        if stated == st.expression and not governs and len(out) == len(own):
            continue
        absorbed = {st.path, *refs} | ({e.path for e in others if _bases(e.expression) <= named} if governs else set())
        out = [e for e in out if e.path not in absorbed] + [Evidence(st.path, stated, "statement", st.score, "own")]
        notes.append(f"{st.path} says how the license files combine" if governs else
                     f"{st.path} confirmed by the metadata or headers")
    return out, notes


def _offers_choice(text: str) -> bool:
    from .license_terms import offers_choice

    return offers_choice(text)


def _without_ambiguity(expr: str) -> str:
    parts = [p for p in re.split(r"\s+AND\s+", expr) if p.strip("() ") != AMBIGUOUS]
    return normalize(" AND ".join(parts)) if parts and " OR " not in expr.replace(f"({AMBIGUOUS})", "") else expr


# --- the repository -------------------------------------------------------------------------------

def detect_repository(paths: Iterable[str], read: Callable[[str], str], *, index: LicenseIndex | None = None,
                      source_paths: Iterable[str] = (), max_headers: int = 30, max_bundled: int = 10) -> Detection:
    """Detect the license of a repository given its file paths (relative, `/`-separated) and a reader.

    `source_paths` are code files whose headers are checked (at most `max_headers` of them)."""
    index = index or load_index()
    paths = sorted(paths)
    evidence: list[Evidence] = []
    readings: dict[str, FileReading] = {}
    scoped: dict[str, list[str]] = {}
    counts = Counter()
    for path in paths:
        role = license_role(path)
        if role is None or (role in ("bundled", "directory") and "/" in path and counts[role] >= max_bundled):
            continue
        counts[role] += 1
        reading = file_expression(read(path), index)
        readings[path] = reading
        if reading.expression is not None:
            evidence.append(Evidence(path, reading.expression, reading.method, reading.score, role))
        for kind, expr in reading.scoped.items() if role == "own" else ():
            scoped.setdefault(kind, []).append(expr)
        if role == "artifact" and reading.expression not in (None, UNKNOWN):
            scoped.setdefault(artifact_kind(path) or "artifact", []).append(reading.expression)
    for path in _statement_targets(readings, paths):  # files a root statement names (`docs/FTL.TXT`)
        readings[path] = file_expression(read(path), index)
    meta, problems = read_metadata(paths, read)
    evidence += _metadata_evidence(meta, index)
    evidence += [Evidence(path, UNKNOWN, f"unparseable: {why}", 0.0, "other") for path, why in problems]
    for path in filter(lambda p: README.match(p), paths):
        section = readme_license_section(read(path))
        stated, cover, other = readme_statement(section, index) if section else (None, 0.0, {})
        for kind, expr in other.items():
            scoped.setdefault(kind, []).append(expr)
        if stated:
            terms_text = without_artifact_clauses(section[:STATEMENT_CHARS]) if other else section[:STATEMENT_CHARS]
            evidence.append(Evidence(path, with_restrictions(stated, terms_text, None, index), "readme", cover,
                                     "declared"))
    headers: Counter = Counter()
    for path in list(source_paths)[:max_headers]:
        found = header_licenses(read(path), index)
        if found:
            expr = join(found, "AND")
            headers[expr] += 1
            evidence.append(Evidence(path, expr, "header", 1.0, "header"))
    expression, how, deciding = _decide(evidence, headers, readings, index, scoped)
    artifact = {k: join(v, "AND") for k, v in scoped.items()}
    unnamed = artifact.pop("path:", None)  # "several directories are under another license": which ones?
    if unnamed and expression is not None and not _folder_rules(evidence, artifact):
        expression = join([expression, unnamed], "AND")  # unknown folders: the license may be anywhere
        how += "; a statement puts unnamed folders under another license"
    elif unnamed:
        artifact["folders named elsewhere"] = unnamed
    if expression is not None:
        expression, moved = _artifact_licenses_apart(expression)
        for kind, expr in moved.items():
            artifact[kind] = join([artifact[kind], expr], "AND") if kind in artifact else expr
    if expression is None:
        return Detection(UNKNOWN, "none", evidence, "no license information", artifact)
    expression = normalize(_refine(expression, headers))
    evidence = [Evidence(e.path, e.expression, e.method, e.score, e.role, e in deciding) for e in evidence]
    status = ("unmatched" if expression == UNKNOWN else
              "ambiguous" if AMBIGUOUS in ids(expression) else "matched")
    return Detection(expression, status, evidence, how, artifact)


def _folder_rules(evidence: list[Evidence], scoped: dict[str, str]) -> bool:
    """Does the repository say, by a license file in a folder or a statement naming folders, which folders
    carry another license?"""
    return any(e.role == "directory" for e in evidence) or any(k.startswith("path:") for k in scoped)


def _statement_targets(readings: dict[str, FileReading], paths: list[str]) -> list[str]:
    """Non-license files that a root statement names (`docs/FTL.TXT`), so the statement can be read whole."""
    prose = " ".join(r.prose for p, r in readings.items() if "/" not in p and r.method == "phrase")
    if not prose:
        return []
    return [p for p in paths if p not in readings and "/" in p and len(p) >= 6
            and re.search(rf"(?<![\w.-]){re.escape(p)}(?![\w-])", prose, re.IGNORECASE)]


def _artifact_licenses_apart(expression: str) -> tuple[str, dict[str, str]]:
    """`Apache-2.0 AND OFL-1.1` -> Apache-2.0 for the code, OFL-1.1 for the fonts (a font license beside others)."""
    if " OR " in expression or " AND " not in expression:
        return expression, {}
    parts = [p.strip() for p in expression.split(" AND ")]
    moved = {p: artifact_license_kind(p) for p in parts}
    keep = [p for p in parts if not moved[p]]
    if not keep:
        return expression, {}
    return join(keep, "AND"), {k: p for p, k in moved.items() if k}


def _decide(evidence: list[Evidence], headers: Counter, readings: dict[str, FileReading],
            index: LicenseIndex, scoped: dict[str, list[str]]) -> tuple[str | None, str, list[Evidence]]:
    own = [e for e in evidence if e.role == "own"]
    confirmations = [e.expression for e in evidence if e.role == "declared" and e.method.startswith("metadata:")]
    confirmations += [join(list(headers), "AND")] if headers else []
    own, notes = _statement_files(own, readings, index, confirmations, scoped)
    declared = [e for e in evidence if e.role == "declared"]
    files = None
    if own:
        grants = [e.expression for e in own if _PATENTS.match(e.path) and e.expression != UNKNOWN]
        exprs = [e.expression for e in own if not _PATENTS.match(e.path)]
        known = [x for x in exprs if x != UNKNOWN]
        files = join(_lgpl3_with_gpl3(list(dict.fromkeys(known))), "OR") if known else UNKNOWN
        if grants and known:  # a PATENTS file adds terms to the license beside it: both apply
            files = join([files] + grants, "AND")
        # a license file we cannot read: alternative or condition? Unless a file says the others are
        # alternatives ("any and all licenses may be applied, either individually or in concert")
        says_or = any(e.expression == UNKNOWN and _offers_choice(readings[e.path].prose)
                      for e in own if e.path in readings)
        if known and len(known) < len(exprs) and not says_or:
            files = join([files, AMBIGUOUS], "AND")
    decided_own = [e for e in evidence if e.role == "own"]
    stated, how, declared = _declared_expression(declared, files)
    note = "; ".join(notes)
    if files is None and stated is None:
        if headers:
            top = headers.most_common(1)[0][0]
            return top, "source-file headers", [e for e in evidence if e.role == "header" and e.expression == top]
        reuse = [e for e in evidence if e.role == "reuse"]
        if reuse:
            return join([e.expression for e in reuse], "AND"), "LICENSES/ texts, all apply", reuse
        return None, "", []
    if stated is None:
        return files, _how("license files" + (" (alternatives)" if len(own) > 1 else ""), note), decided_own
    if files is None or files == UNKNOWN:
        if _families(stated) and not is_allowed(stated, PERMISSIVE):  # "BSD", "GPL": which one?
            stated = join([stated, AMBIGUOUS], "AND")
        return stated, f"{how} (no readable license file)", declared
    clean = not any(i.startswith(MARKER_PREFIX) for i in ids(files))
    if _covers(stated, files):
        if clean and not _families(stated):
            return stated, _how(f"{how}, consistent with the license files", note), declared + decided_own
        return files, _how(f"license files, consistent with {how}", note), decided_own + declared
    if not _real_ids(stated) and _families(stated) and _covers(files, stated):
        # the declaration only says "public domain" or "BSD": the files say which
        return files, _how(f"license files, consistent with {how}", note), decided_own + declared
    if _covers(files, stated):
        # the declaration picks among the files' alternatives; what a file adds as a condition (restrictive
        # markers, a license outside the permissive set AND-ed in one file) still applies
        conditions = [e.expression for e in own if e.expression != UNKNOWN and any(
            i.startswith(MARKER_PREFIX) for i in ids(e.expression))]
        conditions += [p for e in own if " AND " in e.expression and " OR " not in e.expression
                       for p in e.expression.split(" AND ") if not is_allowed(p, PERMISSIVE)]
        return join([stated] + conditions, "AND"), _how(f"{how}, among the license files' alternatives", note), \
            declared + decided_own
    both = join([files, stated], "AND")
    if not is_allowed(both, PERMISSIVE) and (is_allowed(files, PERMISSIVE) or is_allowed(stated, PERMISSIVE)):
        both = join([both, AMBIGUOUS], "AND")
    return both, _how(f"license files and {how} disagree: both apply", note), decided_own + declared


def _how(how: str, note: str) -> str:
    return f"{how} ({note})" if note else how
