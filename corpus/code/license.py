"""Repository license detection: evidence by role, combined as SPDX expressions.

Evidence and its role:
- **own files**: license files at the root (LICENSE*, LICENCE*, COPYING*, UNLICENSE, COPYRIGHT*,
  PATENTS), each matched as a whole text (license_match), with the rest of the file read too:
  statements outside the matched text ("dual licensed under X or Y", "content is CC BY-NC") and
  restrictive terms anywhere (license_terms). Separate own files are alternatives: `A OR B`.
- **declared**: package metadata (license_meta) and the README's license section. When they name
  the licenses of the own files (or more), they say how those combine and decide; when they
  contradict the files, both apply (AND), and a contradiction that matters is `ambiguous`.
- **headers**: SPDX tags and notices in source files; they decide only when nothing above does,
  and refine `-only` to `-or-later` ("Released under the GNU GPLv2+").
- **recorded, not deciding**: REUSE `LICENSES/` texts (used, AND-ed, only when nothing else
  exists), bundled/third-party texts (THIRD-PARTY*, vendor/, third_party/, ...), licenses of
  non-code artifacts (LICENSE_weights, LICENSE-docs, ...), and files such as `copyright-exclude`.

Content licenses inside one file (MIT for code, CC BY-NC for content) are not separated: the file's
expression is `MIT AND CC-BY-NC-4.0`, so the repository is dropped (a license split by prose is not
something the detector can scope safely). Uncertainty adds `LicenseRef-cidermill-ambiguous`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable

from .license_expr import (AMBIGUOUS, MARKER_PREFIX, PERMISSIVE, UNKNOWN, ids, is_allowed, join, known_ids,
                           normalize, parse_expression, parse_ok)
from .license_index import LicenseIndex, load_index
from .license_match import candidate_vocab, match_text, phrase_matches, spdx_tags
from .license_meta import Declared, classifier_expression, read_metadata
from .license_terms import (ALL_RIGHTS_RESERVED, PROPRIETARY, creative_commons, offers_choice, reserved_without_grant,
                            restrictive_hits, unexplained)
from .license_text import words

__all__ = ["PERMISSIVE", "UNKNOWN", "AMBIGUOUS", "Detection", "Evidence", "detect_repository", "is_allowed",
           "is_license_file", "license_role", "name_expression", "parse_expression", "readme_license_section"]

_LICENSE_NAME = re.compile(r"^(?:un)?licen[cs]e|^copying|^copyright|^patents(?:\.|$)", re.IGNORECASE)
_CODE_SUFFIX = re.compile(r"\.(py|js|ts|rb|go|java|c|h|cc|cpp|hpp|rs|php|pl|sh|swift|m|kt|scala|cs|json|ya?ml|"
                          r"toml|xml|svg|png|jpe?g|gif|lock|cfg|ini)$", re.IGNORECASE)
_README = re.compile(r"^readme(\.(md|markdown|rst|txt|adoc|org))?$", re.IGNORECASE)
_HEADING = re.compile(r"^(#{1,6})\s*(.+?)\s*#*\s*$|^(.+)\n(=+|-+)\s*$", re.MULTILINE)
_BUNDLED = {"third", "thirdparty", "3rdparty", "vendor", "vendored", "notice", "notices", "dependencies", "deps",
            "external", "bundled"}
_ARTIFACT = {"weights", "weight", "model", "models", "data", "dataset", "datasets", "docs", "doc", "documentation",
             "content", "contents", "assets", "asset", "art", "artwork", "images", "image", "fonts", "font", "media",
             "audio", "sounds", "music", "icons", "samples", "checkpoints", "book"}
_OTHER = {"exclude", "excludes", "ignore", "template", "check", "list"}
_BUNDLED_DIRS = {"vendor", "third_party", "third-party", "thirdparty", "3rdparty", "node_modules", "external", "deps"}
_FAMILY = {"BSD": r"^(0?BSD-|BSD$)", "GPL": r"^GPL-", "LGPL": r"^LGPL-", "AFL": r"^AFL-",
           "public-domain": r"^(Unlicense|CC0-1\.0|LicenseRef-.*public-domain.*)$", "free": r"."}
# ScanCode keys for "see the LICENSE file", warranty disclaimers and the like: clues, not licenses
_NOISE = re.compile(r"LicenseRef-scancode-(?:unknown|warranty-disclaimer|generic-|other-|free-unknown|see-license)")
_NOTICES = re.compile(r"^(?:third[-_ ]?party|3rd[-_ ]?party)[-_ ]?(?:notices?|licen[cs]es?)", re.IGNORECASE)
_BUNDLE_CUE = re.compile(r"\bthis\s+product\s+(?:includes|bundles|contains)|\b(?:includes|bundles|contains|bundled|"
                         r"vendored|incorporates)\s+(?:[\w.-]+\s+){0,6}?(?:software|code|files|libraries|library|"
                         r"components?|portions|works?)\b|\bthird[\s-]+party\b|\bportions\s+of\s+this\b|"
                         r"\b(?:derived|adapted|copied)\s+from\b", re.IGNORECASE)
_COMMERCIAL = re.compile(r"\b(?:a|under|separate|proprietary)\s+(?:separate\s+)?commercial\s+licen[cs](?:e|ing)\b",
                         re.IGNORECASE)
COMMERCIAL = "LicenseRef-scancode-commercial-license"
_STATES = re.compile(r"\b(?:licen[cs]ed|available|released|distributed|offered|published|provided)\s+(?:\w+\s+){0,3}?"
                     r"(?:under|as)\b|\bdual[\s-]*licen[cs]|\bunder\s+the\s+terms\s+of\b|\blicen[cs]e\s*:|"
                     r"\bcovered\s+by\b|\bsubject\s+to\s+the\b", re.IGNORECASE)
_LICENSE_WORDS = re.compile(r"licen[cs]|permi[st]|warrant|redistribut|\bgrant|\brights\b|\bterms\b|copyleft|"
                            r"public\s+domain|\bmay\s+(?:not\s+)?(?:use|copy|modify)", re.IGNORECASE)
# names metadata uses that are neither SPDX ids nor LicenseDB phrases
_ALIASES = {"cc0": "CC0-1.0", "cc0 1.0": "CC0-1.0", "public domain": MARKER_PREFIX + "family-public-domain",
            "bsd": MARKER_PREFIX + "family-BSD", "gpl": MARKER_PREFIX + "family-GPL",
            "lgpl": MARKER_PREFIX + "family-LGPL"}
_PATENTS = re.compile(r"^patents", re.IGNORECASE)
STATEMENT_CHARS = 2000  # of a README license section


@dataclass(frozen=True)
class Evidence:
    path: str
    expression: str
    method: str  # dice | cover | phrase | spdx_tag | metadata:<field> | classifier | readme | header | ...
    score: float
    role: str = "own"  # own | declared | header | reuse | bundled | artifact | other
    decided: bool = False


@dataclass
class Detection:
    expression: str  # SPDX expression, or `unknown`
    status: str  # matched | unmatched | none | ambiguous
    evidence: list[Evidence] = field(default_factory=list)
    how: str = ""  # which evidence decided and how

    def explain(self) -> str:
        """One line for the `license_evidence` column."""
        parts = [self.how] + [f"{e.path}{'*' if e.decided else ''}={e.expression} ({e.role}, {e.method}"
                              f"{f' {e.score:.2f}' if e.score not in (0.0, 1.0) else ''})" for e in self.evidence]
        return "; ".join(p for p in parts if p)


# --- which file plays which role -----------------------------------------------------------------

def license_role(path: str) -> str | None:
    """own | reuse | bundled | artifact | other for license-like files; None for the rest."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0].lower() in ("licenses", "license", "licences"):
        return None if _CODE_SUFFIX.search(parts[1]) else "reuse"
    name = parts[-1]
    if len(parts) == 1 and _NOTICES.match(name) and not _CODE_SUFFIX.search(name):
        return "bundled"  # THIRD-PARTY-NOTICES.txt, ThirdPartyNotices, 3rdparty-licenses
    if not _LICENSE_NAME.match(name) or _CODE_SUFFIX.search(name):
        return None
    if len(parts) > 1:
        return "bundled" if any(p.lower() in _BUNDLED_DIRS for p in parts[:-1]) else None
    tokens = {t for t in re.split(r"[-_.\s]+", name.lower()) if t}
    if tokens & _OTHER:
        return "other"
    if tokens & _BUNDLED or "party" in tokens:
        return "bundled"
    if tokens & _ARTIFACT:
        return "artifact"
    return "own"


def is_license_file(path: str) -> bool:
    """A root license file or a REUSE `LICENSES/` text (whatever its role)."""
    return license_role(path) in ("own", "reuse", "artifact", "other") or (
        license_role(path) == "bundled" and "/" not in path)


def readme_license_section(text: str) -> str | None:
    """The heading that names the license and the body under it (Markdown `#` or underlined), if any."""
    heads = [(m.start(), m.end(), len(m.group(1)) if m.group(1) else (1 if m.group(4)[0] == "=" else 2),
              m.group(2) or m.group(3)) for m in _HEADING.finditer(text)]
    for i, (_, end, level, title) in enumerate(heads):
        if re.search(r"licen[cs]", title, re.IGNORECASE):
            stop = next((s for s, _, lv, _ in heads[i + 1:] if lv <= level), len(text))
            rest = re.sub(r"^.*?licen[cs]es?\b\s*[:\-—]?", "", title, count=1, flags=re.IGNORECASE).strip()
            body = text[end:stop]
            return f"{title}\n{body}" if rest else body  # `## License: MIT © Jane Doe`
    return None


# --- statements and names -------------------------------------------------------------------------

def _cc_id(cc: str) -> str:
    return cc if not cc.endswith("-unversioned") else MARKER_PREFIX + cc[: -len("-unversioned")].lower()


def statement_expression(text: str, index: LicenseIndex, *, short: bool = False) -> tuple[str | None, float]:
    """The licenses a statement names, joined by its choice words, and the share of words they cover."""
    ws = words(text, strip_copyright=False)
    found = [f for f in phrase_matches(index, ws) if not _NOISE.search(f[2])]
    exprs = [e for _, _, e in found]
    cc = [_cc_id(c) for c in creative_commons(text) if c != "CC-BY-unversioned"]  # plain CC BY: the rules decide
    if cc:  # the CC parser reads NC/SA/ND; phrase rules may stop at "Creative Commons Attribution"
        exprs = [e for e in exprs if not any(i.startswith("CC-BY") for i in ids(e))] + cc
    toks = _id_tokens(text, index)
    if toks:  # ids written as ids are exact; phrase rules read `GPL-2.0-only` as "GPL" (any version)
        fams = {_family(t) for t in toks}
        exprs = [e for e in exprs if not all(_family(i) in fams for i in ids(e))] + toks
    if _COMMERCIAL.search(text):  # "... or, alternatively, under a commercial license"
        exprs.append(COMMERCIAL)
    if toks and not found:
        found = [(0, len(toks), t) for t in toks]
    if not exprs:
        return None, 0.0
    covered = sum(e - s for s, e, _ in found) + 3 * len(cc)
    op = "OR" if offers_choice(text, short=short) else "AND"
    return join(exprs, op), min(1.0, covered / max(len(ws), 1))


_ID_TOKEN = re.compile(r"(?<![\w.-])[A-Za-z0-9][A-Za-z0-9.+-]*[A-Za-z0-9+](?![\w-])")
_ID_WORDS = {"Zlib", "Unlicense", "Beerware", "PostgreSQL"}


def _id_tokens(text: str, index: LicenseIndex) -> list[str]:
    """SPDX ids written exactly as ids (`MIT`, `Apache-2.0`): upper case, or with a digit or hyphen."""
    out = []
    for tok in _ID_TOKEN.findall(text):
        canon = index.spdx_ids.get(tok.lower())
        if canon and canon.lower() == tok.lower() and (tok.isupper() or any(c.isdigit() or c == "-" for c in tok)
                                                      or tok in _ID_WORDS) and len(tok) >= 3:
            norm = normalize(canon)
            if norm.lower() in (tok.lower(), tok.lower() + "-only"):  # not aliases: bare `GPL` means no version
                out.append(norm)
    return list(dict.fromkeys(out))


def _family(spdx_id: str) -> str:
    return re.sub(r"-?v?\d[\d.]*(?:-.*)?$|-(?:only|or-later)$", "", spdx_id)


def readme_statement(section: str, index: LicenseIndex) -> tuple[str | None, float]:
    """The first paragraph of a README license section that names licenses (later paragraphs tend to be
    about dependencies or contributions); choice words count from the paragraph before to the one after."""
    whole = match_text(section[:40000], index=index, phrases=False)
    if whole is not None:  # a whole license text (or an SPDX tag) under the heading
        return whole.expression, whole.score
    paras = [p for p in re.split(r"\n\s*\n", section[:STATEMENT_CHARS]) if p.strip()]
    for i, para in enumerate(paras):
        short = len(words(para)) <= 12
        stated, cover = statement_expression(para, index, short=short)
        if stated:
            if " AND " in stated and "WITH" not in stated:
                region = "\n\n".join(paras[max(i - 1, 0): i + 2])
                if offers_choice(region) or offers_choice(para, short=short):
                    stated = join(sorted(ids(stated) - {UNKNOWN}), "OR")
            return stated, cover
    return None, 0.0


def name_expression(value: str, index: LicenseIndex | None = None) -> str:
    """A license as written in metadata or a dataset column -> SPDX expression (`unknown` if unreadable).

    SPDX expressions are taken as they are; npm's `UNLICENSED` means no license granted; names in
    words go through the Creative Commons parser and the LicenseDB phrase rules; restrictive words
    in the name ("Free for non-commercial use") become markers."""
    value = (value or "").strip()
    if not value or value.lower().startswith("see licen"):
        return UNKNOWN
    if value.upper() == "UNLICENSED" or value.lower() in ("proprietary", "commercial", "all rights reserved"):
        return PROPRIETARY
    alias = _ALIASES.get(re.sub(r"[\s_-]+", " ", value.lower()).removeprefix("the ").removesuffix(" license"))
    if alias:
        return alias
    cc = creative_commons(value)
    if parse_ok(value) and not known_ids(value) and not (cc and not value.upper().startswith("CC")):
        return normalize(value)
    if "/" in value and "://" not in value:  # `MIT/Apache-2.0`, `Dual MIT/GPL`: alternatives
        value = value.replace("/", " or ")
    index = index or load_index()
    expr, _ = statement_expression(value, index, short=True)
    expr = _with_restrictions(expr or UNKNOWN, value, None, index)
    return expr


def _with_restrictions(expr: str, text: str, cand: int | None, index: LicenseIndex) -> str:
    """AND the restrictive terms of `text` that neither the matched text nor a license name explains."""
    hits = restrictive_hits(text)
    if not hits:
        return expr
    if cand is not None and cand >= 0:
        vocab = candidate_vocab(index, cand)
        hits = [(m, h) for m, h in hits if not set(words(h, strip_copyright=False)) <= vocab]
    markers = unexplained(list(dict.fromkeys(m for m, _ in hits)), ids(expr) if expr != UNKNOWN else set())
    if not markers:
        return expr
    if expr == UNKNOWN:
        return join(markers, "AND")
    if not is_allowed(expr, PERMISSIVE):
        return expr  # already not permissive: the markers would change no decision
    return join([expr] + markers, "AND")


def _paragraphs_outside(text: str, vocab: set[str]) -> str:
    """Paragraphs of `text` whose words are mostly not in the matched license text (statements, notes)."""
    out = []
    for para in re.split(r"\n\s*\n", text):
        ws = [w for w in words(para, strip_copyright=False) if not w.isdigit()]
        missing = {w for w in ws if w not in vocab}
        if len(ws) >= 6 and (len(missing) >= 2 or len(missing) > 0.1 * len(ws)):  # not headings
            out.append(para)
    return "\n\n".join(out)


def _is_exception(expr: str) -> bool:
    from .license_expr import licensing

    sym = licensing().known_symbols.get(expr)
    return bool(sym is not None and getattr(sym, "is_exception", False))


def _variants(expr: str) -> set[str]:
    return {re.sub(r"-(only|or-later)$", "", i) for i in _real_ids(expr)}


def file_expression(text: str, index: LicenseIndex) -> tuple[str | None, str, float]:
    """(expression, method, score) of one license file; None for a file of copyright lines only."""
    if not text.strip():
        return UNKNOWN, "empty", 0.0
    m = match_text(text, index=index, phrases=False)
    if m and m.method in ("dice", "cover"):
        expr, method = m.expression, m.method
        outside = _paragraphs_outside(text, candidate_vocab(index, m.candidate))
        second = match_text(outside, index=index, phrases=False) if outside else None
        if second and second.method in ("dice", "cover") and _is_exception(second.expression):
            return _with_restrictions(f"{expr} WITH {second.expression}", text, m.candidate, index), \
                f"{method}+exception", m.score
        prose = outside  # the words around the license texts: where choices and bundling are said
        if second and second.method in ("dice", "cover"):  # a second whole license text in the file
            stated = second.expression
            prose = _paragraphs_outside(outside, candidate_vocab(index, second.candidate))
        else:  # only paragraphs that state a license count (a license text mentions others in passing)
            prose = "\n\n".join(p for p in re.split(r"\n\s*\n", outside) if _STATES.search(p))
            stated, _ = statement_expression(prose, index) if prose else (None, 0.0)
        if stated and _BUNDLE_CUE.search(prose) and not offers_choice(prose):
            method += "+bundled-notice"  # "this product includes X under Y": recorded, not the project's license
        elif stated and _variants(stated) == _variants(expr):
            expr, method = stated, f"{method}+notice"  # the notice says "or later" (or "only") of the same text
        elif stated and not ids(stated) <= ids(expr) | {UNKNOWN}:
            op = "OR" if offers_choice(prose) else "AND"
            expr, method = join([stated, expr], op), f"{method}+statement"
        return _with_restrictions(expr, text, m.candidate, index), method, m.score
    if m:  # SPDX tag
        return _with_restrictions(m.expression, text, None, index), m.method, m.score
    stated, cover = statement_expression(text, index)
    if stated:
        expr = stated if cover >= 0.5 else join([stated, AMBIGUOUS], "AND")
        return _with_restrictions(expr, text, None, index), "phrase", cover
    if reserved_without_grant(text):
        return ALL_RIGHTS_RESERVED, "reserved", 1.0
    restricted = _with_restrictions(UNKNOWN, text, None, index)
    if restricted != UNKNOWN:
        return restricted, "terms", 1.0
    if not words(text) or not _LICENSE_WORDS.search(text):
        return None, "notice", 0.0  # copyright lines, author lists: a notice, not a license
    return UNKNOWN, "unmatched", 0.0


# --- combining ------------------------------------------------------------------------------------

def _real_ids(expr: str) -> set[str]:
    return {i for i in ids(expr) if not i.startswith(MARKER_PREFIX) and i != UNKNOWN}


def _families(expr: str) -> list[str]:
    return [i[len(MARKER_PREFIX + "family-"):] for i in ids(expr) if i.startswith(MARKER_PREFIX + "family-")]


def _covers(declared: str, files: str) -> bool:
    """Does the declared expression name every license the files name (families count)?"""
    named = _real_ids(declared)
    fams = [_FAMILY[f] for f in _families(declared) if f in _FAMILY]
    return all(i in named or any(re.search(p, i) for p in fams) for i in _real_ids(files))


def _declared_expression(declared: list[Evidence]) -> tuple[str | None, str]:
    exprs = [e.expression for e in declared if e.expression != UNKNOWN]
    if not exprs:
        return None, ""
    uniq = list(dict.fromkeys(normalize(e) for e in exprs))
    best = max(uniq, key=lambda e: (len(_real_ids(e)), -len(_families(e))))
    if all(_covers(best, e) for e in uniq):
        terms = [i for e in uniq for i in sorted(ids(e)) if i.startswith(MARKER_PREFIX) and "family-" not in i
                 and i not in ids(best)]  # a restriction said in one place holds whatever the others say
        return (join([best] + terms, "AND") if terms else best), "declared"
    both = join(uniq, "AND")  # metadata and README disagree: all of them apply
    return (both if is_allowed(both, PERMISSIVE) else join([both, AMBIGUOUS], "AND")), "declared-conflict"


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
        else:
            vals = [name_expression(v, index) for v in d.values]
        vals = [v for v in vals if v != UNKNOWN]
        if vals:
            out.append(Evidence(d.path, join(vals, "OR"), f"metadata:{d.field}", 1.0, "declared"))
    return out


def detect_repository(paths: Iterable[str], read: Callable[[str], str], *, index: LicenseIndex | None = None,
                      source_paths: Iterable[str] = (), max_headers: int = 30, max_bundled: int = 10) -> Detection:
    """Detect the license of a repository given its file paths (relative, `/`-separated) and a reader.

    `source_paths` are code files whose headers are checked (at most `max_headers` of them)."""
    index = index or load_index()
    paths = sorted(paths)
    evidence: list[Evidence] = []
    bundled = 0
    for path in paths:
        role = license_role(path)
        if role is None or (role == "bundled" and "/" in path and bundled >= max_bundled):
            continue
        bundled += role == "bundled"
        expr, method, score = file_expression(read(path), index)
        if expr is not None:
            evidence.append(Evidence(path, expr, method, score, role))
    meta, problems = read_metadata(paths, read)
    evidence += _metadata_evidence(meta, index)
    evidence += [Evidence(path, UNKNOWN, f"unparseable: {why}", 0.0, "other") for path, why in problems]
    for path in filter(lambda p: _README.match(p), paths):
        section = readme_license_section(read(path))
        stated, cover = readme_statement(section, index) if section else (None, 0.0)
        if stated:
            evidence.append(Evidence(path, _with_restrictions(stated, section[:STATEMENT_CHARS], None, index),
                                     "readme", cover, "declared"))
    headers: Counter = Counter()
    for path in list(source_paths)[:max_headers]:
        found = header_licenses(read(path), index)
        if found:
            expr = join(found, "AND")
            headers[expr] += 1
            evidence.append(Evidence(path, expr, "header", 1.0, "header"))
    expression, how, deciding = _decide(evidence, headers)
    if expression is None:
        return Detection(UNKNOWN, "none", evidence, "no license information")
    expression = normalize(_refine(expression, headers))
    evidence = [Evidence(e.path, e.expression, e.method, e.score, e.role, e in deciding) for e in evidence]
    status = ("unmatched" if expression == UNKNOWN else
              "ambiguous" if AMBIGUOUS in ids(expression) else "matched")
    return Detection(expression, status, evidence, how)


def _decide(evidence: list[Evidence], headers: Counter) -> tuple[str | None, str, list[Evidence]]:
    own = [e for e in evidence if e.role == "own"]
    declared = [e for e in evidence if e.role == "declared"]
    files = None
    if own:
        grants = [e.expression for e in own if _PATENTS.match(e.path) and e.expression != UNKNOWN]
        exprs = [e.expression for e in own if not _PATENTS.match(e.path)]
        known = [x for x in exprs if x != UNKNOWN]
        files = join(_lgpl3_with_gpl3(list(dict.fromkeys(known))), "OR") if known else UNKNOWN
        if grants and known:  # a PATENTS file adds terms to the license beside it: both apply
            files = join([files] + grants, "AND")
        if known and len(known) < len(exprs):
            files = join([files, AMBIGUOUS], "AND")  # a license file we cannot read: alternative or condition?
    stated, how = _declared_expression(declared)
    if files is None and stated is None:
        if headers:
            top = headers.most_common(1)[0][0]
            return top, "source-file headers", [e for e in evidence if e.role == "header" and e.expression == top]
        reuse = [e for e in evidence if e.role == "reuse"]
        if reuse:
            return join([e.expression for e in reuse], "AND"), "LICENSES/ texts, all apply", reuse
        return None, "", []
    if stated is None:
        return files, "license files" + (" (alternatives)" if len(own) > 1 else ""), own
    if files is None or files == UNKNOWN:
        if _families(stated) and not is_allowed(stated, PERMISSIVE):  # "BSD", "GPL": which one?
            stated = join([stated, AMBIGUOUS], "AND")
        return stated, f"{how} (no readable license file)", declared
    clean = not any(i.startswith(MARKER_PREFIX) for i in ids(files))
    if _covers(stated, files):
        if clean and not _families(stated):
            return stated, f"{how}, consistent with the license files", declared + own
        return files, f"license files, consistent with {how}", own + declared
    if _covers(files, stated):
        # the declaration picks among the files' alternatives; what a file adds as a condition
        # (`MIT AND CC-BY-NC-4.0` in one file, restrictive markers) still applies
        conditions = [e.expression for e in own if e.expression != UNKNOWN and
                      (" AND " in e.expression or any(i.startswith(MARKER_PREFIX) for i in ids(e.expression)))]
        return join([stated] + conditions, "AND"), f"{how}, among the license files' alternatives", declared + own
    both = join([files, stated], "AND")
    if not is_allowed(both, PERMISSIVE) and (is_allowed(files, PERMISSIVE) or is_allowed(stated, PERMISSIVE)):
        both = join([both, AMBIGUOUS], "AND")
    return both, f"license files and {how} disagree: both apply", own + declared
