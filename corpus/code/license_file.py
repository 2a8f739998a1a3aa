"""One license file, statement or metadata value -> an SPDX expression, with what it covers.

A license file is read as the full license texts it holds (the whole file, else each text found
inside it: a statement before a BSD text, an Apache text then a GPL text, `license_match.locate_texts`)
plus the prose around them. The prose says how the texts combine: a choice ("dual licensed",
"either", "at your option") makes them alternatives (OR), a license named together with them and
no choice adds to them (AND), "this product includes X under Y" records a bundled part, "or any
later version" refines the version. Clauses whose subject is an artifact (model weights, the
documentation, fonts: license_scope.py) license that artifact, not the code. Restrictive terms
(non-commercial, no derivatives, field of use: license_terms.py) found in words that no matched
text explains are AND-ed as markers. A statement that names licenses but leaves most of its words
unexplained is marked `ambiguous`; the repository decision (license.py) may resolve that from the
files it points to, the package metadata or the source headers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .license_expr import (AMBIGUOUS, MARKER_PREFIX, PERMISSIVE, UNKNOWN, ids, is_allowed, join, known_ids, normalize,
                           parse_expression, parse_ok)
from .license_index import LicenseIndex, load_index
from .license_match import NOISE, candidate_vocab, locate_texts, match_text, paragraphs, phrase_matches
from .license_scope import split_scopes, without_artifact_clauses
from .license_terms import (ALL_RIGHTS_RESERVED, PROPRIETARY, creative_commons, offers_choice, reserved_without_grant,
                            restrictive_hits, unexplained)
from .license_text import words

_BUNDLE_CUE = re.compile(r"\bthis\s+product\s+(?:includes|bundles|contains)|\b(?:includes|bundles|contains|bundled|"
                         r"vendored|incorporates)\s+(?:[\w.-]+\s+){0,6}?(?:software|code|files|libraries|library|"
                         r"components?|portions|works?)\b|\bthird[\s-]+party\b|\bportions\s+of\s+this\b|"
                         r"\b(?:derived|adapted|copied)\s+from\b", re.IGNORECASE)
_COMMERCIAL = re.compile(r"\b(?:a|under|separate|proprietary)\s+(?:separate\s+)?commercial\s+licen[cs](?:e|ing)\b",
                         re.IGNORECASE)
COMMERCIAL = "LicenseRef-scancode-commercial-license"
_STATES = re.compile(r"\b(?:licen[cs]ed|available|released|distributed|offered|published|provided)\s+(?:\w+\s+){0,3}?"
                     r"(?:under|as)\b|\bdual[\s-]*licen[cs]|\bunder\s+the\s+terms\s+of\b|\blicen[cs]e\s*:|"
                     r"\bcovered\s+by\b|\bsubject\s+to\s+the\b|\bsame\s+terms\s+as\b", re.IGNORECASE)
_LICENSE_WORDS = re.compile(r"licen[cs]|permi[st]|warrant|redistribut|\bgrant|\brights\b|\bterms\b|copyleft|"
                            r"public\s+domain|\bmay\s+(?:not\s+)?(?:use|copy|modify)", re.IGNORECASE)
# names metadata uses that are neither SPDX ids nor LicenseDB phrases
_ALIASES = {"cc0": "CC0-1.0", "cc0 1.0": "CC0-1.0", "public domain": MARKER_PREFIX + "family-public-domain",
            "bsd": MARKER_PREFIX + "family-BSD", "gpl": MARKER_PREFIX + "family-GPL",
            "lgpl": MARKER_PREFIX + "family-LGPL"}
# "under the same terms as Perl itself": Perl 5's own terms, the Artistic License or the GPL (v1 or later)
PERL = "Artistic-1.0-Perl OR GPL-1.0-or-later"
_PERL_TERMS = re.compile(r"\bsame\s+terms\s+as\s+(?:the\s+)?perl\s*(?:5\s*)?(?:programming\s+language\s*"
                         r"(?:system\s*)?)?(?:itself|\.)", re.IGNORECASE)
# a bare "BSD" ("dual-licensed under BSD OR GPLv2", "the BSD-style license"): the family, version unsaid
_BSD_WORD = re.compile(r"\bBSD(?:[- ]style|[- ]like)?\b(?![- ]?\d)", re.IGNORECASE)
STATEMENT_CHARS = 2000  # of a README license section
_RESERVED = {"all", "rights", "reserved"}
_UPPER_OR = re.compile(r"[\w)\]]\s+OR\s+[\w(\[]")
_UPPER_AND = re.compile(r"[\w)\]]\s+AND\s+[\w(\[]")


@dataclass(frozen=True)
class FileReading:
    """What one license file says. `expression` is None for a notice of copyright lines only."""
    expression: str | None
    method: str  # dice | cover | segments | phrase | spdx_tag | reserved | terms | notice | unmatched | empty
    score: float
    texts: tuple[str, ...] = ()  # the full license texts found in it
    prose: str = ""  # the words around them: statements, notes
    scoped: dict[str, str] = field(default_factory=dict)  # artifact kind -> what the file licenses it under


# --- statements ------------------------------------------------------------------------------------

def _cc_id(cc: str) -> str:
    return cc if not cc.endswith("-unversioned") else MARKER_PREFIX + cc[: -len("-unversioned")].lower()


def statement_expression(text: str, index: LicenseIndex, *, short: bool = False) -> tuple[str | None, float]:
    """The licenses a statement names, joined by its choice words, and the share of words they cover."""
    ws = words(text, strip_copyright=False)
    # "All rights reserved" after a copyright line is a notice, not a license (reserved_without_grant
    # reads it where nothing grants anything)
    found = [f for f in phrase_matches(index, ws) if not NOISE.search(f[2]) and not set(ws[f[0]:f[1]]) <= _RESERVED]
    exprs = [e for _, _, e in found]
    cc = [_cc_id(c) for c in creative_commons(text) if c != "CC-BY-unversioned"]  # plain CC BY: the rules decide
    if cc:  # the CC parser reads NC/SA/ND; phrase rules may stop at "Creative Commons Attribution"
        exprs = [e for e in exprs if not any(i.startswith("CC-BY") for i in ids(e))] + cc
    toks = _id_tokens(text, index)
    if toks:  # ids written as ids are exact; phrase rules read `GPL-2.0-only` as "GPL" (any version)
        fams = {_family(t) for t in toks}
        exprs = [e for e in exprs if not all(_family(i) in fams for i in ids(e))] + toks
    perl = _PERL_TERMS.search(text)
    if perl:  # the phrase rules know the words but not always the Perl flavour of the Artistic License
        exprs = [e for e in exprs if not ids(e) <= {"Artistic-1.0", "Artistic-1.0-Perl", "GPL-1.0-or-later",
                                                      "GPL-1.0-only"}] + [PERL]
    if _BSD_WORD.search(text) and not any(i.startswith(("BSD", "0BSD")) for e in exprs for i in ids(e)):
        exprs.append(MARKER_PREFIX + "family-BSD")
    if _COMMERCIAL.search(text):  # "... or, alternatively, under a commercial license"
        exprs.append(COMMERCIAL)
    if toks and not found:
        found = [(0, len(toks), t) for t in toks]
    if not exprs:
        return None, 0.0
    covered = sum(e - s for s, e, _ in found) + 3 * len(cc) + (len(words(perl.group(0))) if perl else 0)
    # an SPDX operator written between ids ("a dual Apache-2.0 OR GPL-2.0-or-later license") is meant
    spdx_or = len(toks) > 1 and _UPPER_OR.search(text) is not None and not _UPPER_AND.search(text)
    op = "OR" if spdx_or or offers_choice(text, short=short) else "AND"
    return join(exprs, op), min(1.0, covered / max(len(ws), 1))


_ID_TOKEN = re.compile(r"(?<![\w.-])[A-Za-z0-9][A-Za-z0-9.+-]*[A-Za-z0-9+](?![\w-])")
_ID_WORDS = {"Zlib", "Unlicense", "Beerware", "PostgreSQL"}
# SPDX ids that are everyday words in capitals ("JSON Web Signature", "the NTP client"): not ids in prose
_NOT_ID_WORDS = {"JSON", "NTP", "ICU", "IPA", "TCL", "SGI", "ADSL", "CUA-OPL-1.0"}


def _id_tokens(text: str, index: LicenseIndex) -> list[str]:
    """SPDX ids written exactly as ids (`MIT`, `Apache-2.0`): upper case, or with a digit or hyphen."""
    out = []
    for tok in _ID_TOKEN.findall(text):
        canon = index.spdx_ids.get(tok.lower())
        if tok in _NOT_ID_WORDS:
            continue
        if canon and canon.lower() == tok.lower() and (tok.isupper() or any(c.isdigit() or c == "-" for c in tok)
                                                      or tok in _ID_WORDS) and len(tok) >= 3:
            norm = normalize(canon)
            if norm.lower() in (tok.lower(), tok.lower() + "-only"):  # not aliases: bare `GPL` means no version
                out.append(norm)
    return list(dict.fromkeys(out))


def _family(spdx_id: str) -> str:
    return re.sub(r"-?v?\d[\d.]*(?:-.*)?$|-(?:only|or-later)$", "", spdx_id)


def scoped_statement(text: str, index: LicenseIndex, *, short: bool = False
                     ) -> tuple[str | None, float, dict[str, str]]:
    """`statement_expression` of the clauses that license code, and the artifact clauses' licenses."""
    code, other = split_scopes(text)
    scoped = {}
    for kind, clause in other.items():
        expr, _ = statement_expression(clause, index, short=short)
        if expr or kind.startswith("path:"):  # a folder under a license the index does not know: unknown
            scoped[kind] = expr or UNKNOWN
    if not scoped:  # nothing scoped away: read the text as a whole (choice words may sit anywhere)
        stated, cover = statement_expression(text, index, short=short)
        return stated, cover, {}
    stated, cover = statement_expression(code, index, short=short) if code.strip() else (None, 0.0)
    return stated, cover, scoped


def readme_statement(section: str, index: LicenseIndex) -> tuple[str | None, float, dict[str, str]]:
    """The first paragraph of a README license section that names licenses for the code (later ones tend
    to be about dependencies or contributions); choice words count from the paragraph before to the one
    after. Artifact clauses ("the model weights are CC BY-NC") are returned apart."""
    whole = match_text(section[:40000], index=index, phrases=False)
    if whole is not None:  # a whole license text (or an SPDX tag) under the heading
        return whole.expression, whole.score, {}
    paras = [p for p in re.split(r"\n\s*\n", section[:STATEMENT_CHARS]) if p.strip()]
    scoped: dict[str, str] = {}
    for i, para in enumerate(paras):
        short = len(words(para)) <= 12
        stated, cover, other = scoped_statement(para, index, short=short)
        scoped.update(other)
        if stated:
            if " AND " in stated and "WITH" not in stated:
                region = "\n\n".join(paras[max(i - 1, 0): i + 2])
                if offers_choice(region) or offers_choice(para, short=short):
                    stated = join(sorted(ids(stated) - {UNKNOWN}), "OR")
            for later in paras[i + 1:]:  # an artifact clause further down still scopes its license away
                scoped.update(scoped_statement(later, index)[2])
            return stated, cover, scoped
    return None, 0.0, scoped


_SPDX_OPERATOR = re.compile(r"\s(?:AND|OR|WITH)\s")


def name_expression(value: str, index: LicenseIndex | None = None) -> str:
    """A license as written in metadata or a dataset column -> SPDX expression (`unknown` if unreadable).

    SPDX expressions are taken as they are (`AND` stays `AND`); npm's `UNLICENSED` means no license
    granted; names in words go through the Creative Commons parser and the LicenseDB phrase rules;
    restrictive words in the name ("Free for non-commercial use") become markers."""
    value = (value or "").strip()
    if not value or value.lower().startswith("see licen"):
        return UNKNOWN
    if value.upper() == "UNLICENSED" or value.lower() in ("proprietary", "commercial", "all rights reserved"):
        return PROPRIETARY
    alias = _ALIASES.get(re.sub(r"[\s_-]+", " ", value.lower()).removeprefix("the ").removesuffix(" license"))
    if alias:
        return alias
    cc = creative_commons(value)
    if parse_ok(value) and not known_ids(value) and (
            _SPDX_OPERATOR.search(value) or not (cc and not value.upper().startswith("CC"))):
        return normalize(value)  # an SPDX expression of known ids: its operators are meant
    if "/" in value and "://" not in value:  # `MIT/Apache-2.0`, `Dual MIT/GPL`: alternatives
        value = value.replace("/", " or ")
    index = index or load_index()
    expr, _ = statement_expression(value, index, short=True)
    return with_restrictions(expr or UNKNOWN, value, None, index)


def with_restrictions(expr: str, text: str, vocab: set[str] | None, index: LicenseIndex) -> str:
    """AND the restrictive terms of `text` that neither the matched texts (`vocab`) nor a license name explains."""
    hits = restrictive_hits(text)
    if not hits:
        return expr
    if vocab:
        hits = [(m, h) for m, h in hits if not set(words(h, strip_copyright=False)) <= vocab]
    markers = list(dict.fromkeys(m for m, _ in hits))
    if expr != UNKNOWN:  # explained only when every alternative names a license that says so
        markers = [m for m in markers if any(unexplained([m], alt) for alt in _alternatives(expr))]
    if not markers:
        return expr
    if expr == UNKNOWN:
        return join(markers, "AND")
    if not is_allowed(expr, PERMISSIVE):
        return expr  # already not permissive: the markers would change no decision
    return join([expr] + markers, "AND")


def _alternatives(expr: str) -> list[set[str]]:
    """The ids of each alternative of an expression (its disjunctive normal form)."""
    def dnf(node) -> list[set[str]]:
        if isinstance(node, str):
            return [{node}]
        op, args = node
        if op == "OR":
            return [alt for a in args for alt in dnf(a)]
        out = [set()]
        for a in args:  # AND and WITH: every part applies
            out = [x | y for x in out for y in dnf(a)][:64]
        return out
    return dnf(parse_expression(expr))


# --- one license file ------------------------------------------------------------------------------

def _is_exception(expr: str) -> bool:
    from .license_expr import licensing

    if expr.startswith("LicenseRef-"):  # LicenseDB files restrictions (the Commons Clause) as exceptions
        return False
    sym = licensing().known_symbols.get(expr)
    return bool(sym is not None and getattr(sym, "is_exception", False))


def _variants(expr: str) -> set[str]:
    return {re.sub(r"-(only|or-later)$", "", i) for i in ids(expr) if not i.startswith(MARKER_PREFIX)} - {UNKNOWN}


def _outside(paras: list[str], vocab: set[str]) -> list[str]:
    """Paragraphs whose words are mostly not in the matched license text (statements, notes), not headings."""
    out = []
    for para in paras:
        ws = [w for w in words(para, strip_copyright=False) if not w.isdigit()]
        missing = {w for w in ws if w not in vocab}
        if len(ws) >= 6 and (len(missing) >= 2 or len(missing) > 0.1 * len(ws)):
            out.append(para)
    return out


def _texts(text: str, index: LicenseIndex) -> tuple[list[str], set[str], list[str], str, float, list]:
    """(expressions of the full texts, their words, the other paragraphs, method, score, [(window text, its
    text's words)]) of a license file: the whole file as one text when it is one (Dice), else each text
    found inside it."""
    m = match_text(text, index=index, phrases=False)
    if m and m.method == "dice":  # one text; what is left may still hold a short one (an exception's)
        vocab = candidate_vocab(index, m.candidate)
        rest = _outside(paragraphs(text), vocab)
        more = locate_texts(rest, index=index, max_texts=2) if len(words("\n\n".join(rest))) >= 40 else []
        if not more:
            return [m.expression], vocab, rest, "dice", m.score, []
        extra = {i for loc in more for i in range(loc.start, loc.end)}
        vocab = vocab.union(*(candidate_vocab(index, loc.candidate) for loc in more))
        return ([m.expression] + [loc.expression for loc in more], vocab,
                [p for i, p in enumerate(rest) if i not in extra], "dice", m.score, [])
    paras = paragraphs(text)
    located = locate_texts(paras, index=index) if len(words(text)) >= 20 else []
    if not located:
        if m and m.method == "cover":  # the whole text of a license, words beyond it not in whole paragraphs
            vocab = candidate_vocab(index, m.candidate)
            return [m.expression], vocab, _outside(paras, vocab), "cover", m.score, []
        return [], set(), paras, "", 0.0, []
    windows = [("\n\n".join(paras[loc.start:loc.end]), candidate_vocab(index, loc.candidate)) for loc in located]
    vocab = set().union(*(w for _, w in windows))
    inside = {i for loc in located for i in range(loc.start, loc.end)}
    rest = [p for i, p in enumerate(paras) if i not in inside]
    exprs = [loc.expression for loc in located]
    method = "dice" if len(located) == 1 and not _outside(rest, vocab) else "segments"
    return exprs, vocab, _outside(rest, vocab), method, min(loc.score for loc in located), windows


def file_expression(text: str, index: LicenseIndex) -> FileReading:
    """What one root license file says (see the module's docstring)."""
    if not text.strip():
        return FileReading(UNKNOWN, "empty", 0.0)
    tags = match_text(text, index=index, phrases=False)
    if tags and tags.method == "spdx_tag":
        return FileReading(with_restrictions(tags.expression, text, None, index), "spdx_tag", 1.0)
    texts, vocab, rest, method, score, windows = _texts(text, index)
    if not texts:
        return _statement_file(text, index)
    base = [t for t in texts if not _is_exception(t)]
    excs = [t for t in texts if _is_exception(t)]
    if base and excs:  # a license text and an exception text: `GPL-2.0-only WITH Classpath-exception-2.0`
        base = [f"{base[0]} WITH {excs[0]}"] + base[1:]
        method += "+exception"
    prose_all = "\n\n".join(rest)
    code_prose, scoped_text = split_scopes(prose_all) if prose_all else ("", {})
    scoped = {k: e or UNKNOWN for k, v in scoped_text.items() for e in [statement_expression(v, index)[0]]
              if e or k.startswith("path:")}
    prose = "\n\n".join(p for p in re.split(r"\n\s*\n", code_prose) if _STATES.search(p)) if code_prose else ""
    stated = statement_expression(prose, index)[0] if prose else None
    choice = offers_choice(code_prose) if code_prose else False
    expr = join(base, "OR" if choice else "AND")
    if stated and _BUNDLE_CUE.search(prose) and not choice:
        expr, method = base[0], method + "+bundled-notice"  # "this product includes X under Y": recorded
    elif stated and _variants(stated) and _variants(stated) <= _variants(expr) | _families_of(stated, expr):
        # the statement names the texts' licenses: it says which versions ("or later") and how they combine
        expr, method = _refined(stated, base, choice), method + "+notice"
    elif stated and not ids(stated) <= ids(expr) | {UNKNOWN}:
        expr, method = join([stated, expr], "OR" if offers_choice(prose) else "AND"), method + "+statement"
    if method.startswith("segments"):  # words outside the texts explain nothing; a text explains its own
        restricted = with_restrictions(expr, without_artifact_clauses(prose_all), None, index)
        for loc_text, loc_vocab in windows:
            restricted = with_restrictions(restricted, loc_text, loc_vocab, index)
    else:
        restricted = with_restrictions(expr, without_artifact_clauses(text) if scoped_text else text, vocab, index)
    return FileReading(restricted, method, score, tuple(texts), prose_all, scoped)


def _families_of(stated: str, expr: str) -> set[str]:
    """Variants in `stated` that are only a family name (`BSD`) of a license in `expr`."""
    fams = {i[len(MARKER_PREFIX + "family-"):] for i in ids(stated) if i.startswith(MARKER_PREFIX + "family-")}
    return {v for v in _variants(expr) if any(v.startswith(f) or (f == "BSD" and v == "0BSD") for f in fams)}


def _refined(stated: str, texts: list[str], choice: bool) -> str:
    """The texts, joined as the statement joins them, each in the version the statement gives it."""
    named = {re.sub(r"-(only|or-later)$", "", i): i for i in ids(stated) if not i.startswith(MARKER_PREFIX)}
    out = []
    for t in texts:
        for i in ids(t):
            base = re.sub(r"-(only|or-later)$", "", i)
            if base in named and named[base] != i:
                t = re.sub(rf"(?<![\w.-]){re.escape(i)}(?![\w.-])", named[base], t)
        out.append(t)
    if " OR " in stated and " AND " not in stated and len(out) > 1:
        choice = True
    if _PERL_TERMS.search(stated) or stated == PERL:
        return PERL
    return join(out, "OR" if choice else "AND")


def _statement_file(text: str, index: LicenseIndex) -> FileReading:
    """A license file with no full license text: a statement, a proprietary notice, or copyright lines."""
    m = match_text(text, index=index, phrases=False)
    if m:  # an SPDX tag
        return FileReading(with_restrictions(m.expression, text, None, index), m.method, m.score)
    stated, cover, scoped = scoped_statement(text, index)
    if stated:
        expr = stated if cover >= 0.5 else join([stated, AMBIGUOUS], "AND")
        code_text = without_artifact_clauses(text) if scoped else text
        return FileReading(with_restrictions(expr, code_text, None, index), "phrase", cover, (), text, scoped)
    if scoped:  # only artifacts are licensed here
        return FileReading(None, "artifact-statement", 0.0, (), text, scoped)
    if reserved_without_grant(text):
        return FileReading(ALL_RIGHTS_RESERVED, "reserved", 1.0)
    restricted = with_restrictions(UNKNOWN, text, None, index)
    if restricted != UNKNOWN:
        return FileReading(restricted, "terms", 1.0)
    if not words(text) or not _LICENSE_WORDS.search(text):
        return FileReading(None, "notice", 0.0)  # copyright lines, author lists: a notice, not a license
    return FileReading(UNKNOWN, "unmatched", 0.0, (), text)
