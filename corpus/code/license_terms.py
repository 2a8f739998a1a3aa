"""Words in license texts that change the decision, read over the whole text.

- Restrictive terms: non-commercial, no-derivatives, share-alike, field-of-use limits, and "All
  rights reserved" with no grant. Each becomes a marker (`LicenseRef-cidermill-<term>`) that the
  detector ANDs to what the text otherwise says. The patterns are checked (tests) to fire on no
  permissive license's reference text in ScanCode's LicenseDB, so a hit means text was added.
- Creative Commons names in words or short forms (`CC BY-NC-SA 4.0`, `Attribution-NonCommercial
  4.0 International`) -> SPDX ids, so an NC/SA/ND name never reads as plain CC-BY.
- Choice cues ("dual licensed", "either ... or", "at your option"): licenses named in one statement
  with a cue are alternatives (OR), without one they all apply (AND).
"""

from __future__ import annotations

import re

from .license_expr import MARKER_PREFIX

NON_COMMERCIAL = MARKER_PREFIX + "non-commercial"
NO_DERIVATIVES = MARKER_PREFIX + "no-derivatives"
SHARE_ALIKE = MARKER_PREFIX + "share-alike"
FIELD_OF_USE = MARKER_PREFIX + "field-of-use"
ALL_RIGHTS_RESERVED = MARKER_PREFIX + "all-rights-reserved"
PROPRIETARY = MARKER_PREFIX + "proprietary"

_NC = r"non[\s-]*commercial"
_PURPOSE = r"(?:academic|research|educational|education|personal|private|non[\s-]*profit|evaluation|internal|scientific)"
_TERMS = [
    (NON_COMMERCIAL, [
        rf"\b{_NC}\b",
        r"\bnot\s+(?:be\s+)?(?:used\s+|sold\s+|distributed\s+)?(?:for|in)\s+(?:any\s+)?commercial\b",
        r"\bcommercial\s+(?:use|usage|purposes?|exploitation|distribution)\s+(?:of\s+[\w\s]{0,40}?)?(?:is|are)\s+"
        r"(?:strictly\s+|expressly\s+)?(?:not\s+(?:permitted|allowed)|prohibited|forbidden)",
        r"\b(?:may|must|shall)\s+not\s+(?:be\s+)?(?:sell|sold|resell|resold|used?\s+commercially)\b",
        r"\bno\s+commercial\s+(?:use|usage|purposes?)\b",
        r"\bdoes\s+not\s+grant\s+(?:to\s+)?you,?\s+the\s+right\s+to\s+sell\b",  # Commons Clause
        r"\bcc[\s-]+by[\s-]+nc\b",
    ]),
    (NO_DERIVATIVES, [
        r"\bno[\s-]*deriv(?:atives|s|ative\s+works)\b",
        r"\bcc[\s-]+by(?:[\s-]+nc)?[\s-]+nd\b",
        r"\b(?:may|must|shall)\s+not\s+(?:modify|alter|adapt|create\s+derivative)",
    ]),
    (SHARE_ALIKE, [r"\bshare[\s-]*alike\b", r"\bcc[\s-]+by(?:[\s-]+nc)?[\s-]+sa\b"]),
    (FIELD_OF_USE, [
        rf"\b(?:for|to)\s+{_PURPOSE}(?:\s+(?:and|or|/)\s+{_PURPOSE})*\s+(?:use|usage|purposes?)\s+only\b",
        rf"\b(?:only|solely|exclusively)\s+(?:be\s+used\s+)?(?:for|in)\s+(?:non[\s-]*commercial\s+)?{_PURPOSE}\b",
        rf"\b{_PURPOSE}(?:\s+(?:and|or)\s+{_PURPOSE})*\s+use\s+only\b",
        r"\b(?:may|must|shall)\s+not\s+(?:be\s+)?used?\s+(?:for|in|by)\s+(?:any\s+)?"
        r"(?:military|weapons?|surveillance|nuclear|government)",
        r"\bused\s+for\s+good,?\s+not\s+evil\b",
    ]),
]
_TERMS = [(m, [re.compile(p) for p in pats]) for m, pats in _TERMS]
# Mentions that grant rather than restrict: "commercial and non-commercial use", "even for commercial".
_BOTH = re.compile(rf"\bcommercial\s*(?:and|or|/|&|,)\s*{_NC}|{_NC}\s*(?:and|or|/|&|,)\s*commercial")
_SPACE = re.compile(r"\s+")

_RIGHTS = re.compile(r"\ball\s+rights\s+reserved\b", re.IGNORECASE)
_GRANT = re.compile(r"permission\s+is\s+(?:hereby\s+)?granted|\blicen[cs]ed\s+(?:to\s+you\s+)?under\b|"
                    r"redistribution\s+and\s+use|\bfree\s+software\b|\bhereby\s+grants?\b|\bpublic\s+domain\b|"
                    r"\byou\s+(?:may|can|are\s+free)\b|\bis\s+(?:hereby\s+)?permitted\b|\breleased\s+under\b|"
                    r"\bdistributed\s+under\b|\bsubject\s+to\s+the\s+(?:terms|conditions)\b", re.IGNORECASE)


def _plain(text: str) -> str:
    return _SPACE.sub(" ", text.lower().replace("\u2010", "-").replace("\u2011", "-").replace("\u2013", "-"))


def restrictive_hits(text: str) -> list[tuple[str, str]]:
    """(marker, matched words) for each restrictive term found anywhere in `text`."""
    plain = _BOTH.sub(" ", _plain(text))
    out = []
    for marker, pats in _TERMS:
        for p in pats:
            out.extend((marker, m.group(0)) for m in p.finditer(plain))
    return out


def restrictive_terms(text: str) -> list[str]:
    """Markers of the restrictive terms found anywhere in `text` (in a fixed order)."""
    return list(dict.fromkeys(m for m, _ in restrictive_hits(text)))


def reserved_without_grant(text: str) -> bool:
    """"All rights reserved" and no words that grant anything: a proprietary notice."""
    return bool(_RIGHTS.search(text)) and not _GRANT.search(text)


# Markers a license id already explains: CC-BY-NC-4.0 is non-commercial by name.
_EXPLAINS = {
    NON_COMMERCIAL: re.compile(r"-NC\b|-NC-|non-?commercial|noncommercial|proprietary|commercial", re.IGNORECASE),
    NO_DERIVATIVES: re.compile(r"-ND\b|-ND-|no-?deriv|proprietary|commercial", re.IGNORECASE),
    SHARE_ALIKE: re.compile(r"-SA\b|-SA-|share-?alike", re.IGNORECASE),
    FIELD_OF_USE: re.compile(r"^JSON$|LicenseRef-scancode-|proprietary|commercial", re.IGNORECASE),
}


def unexplained(markers: list[str], license_ids: set[str]) -> list[str]:
    """Markers that no named license accounts for (`CC-BY-NC-4.0` accounts for non-commercial)."""
    return [m for m in markers if not any(_EXPLAINS.get(m, re.compile("$^")).search(i) for i in license_ids)]


# --- Creative Commons names -----------------------------------------------------------------------

_CC = re.compile(
    r"\b(?:cc|creative\s*commons)[\s-]*(?:licen[cs]e\s*)?[:(]?\s*"
    r"(?P<parts>(?:by|attribution)(?:[\s-]*(?:\+|and|/)?[\s-]*(?:nc|non-?commercial|sa|share-?alike|nd|no-?deriv\w*))*)"
    r"[\s)-]*(?:licen[cs]e\s*)?(?:v(?:ersion)?\.?\s*)?(?P<ver>[1-4]\.0|[1-4](?![\d.]))?",
    re.IGNORECASE)


def creative_commons(text: str) -> list[str]:
    """SPDX ids of the Creative Commons licenses named in `text` (`CC BY-NC 4.0` -> CC-BY-NC-4.0)."""
    out = []
    for m in _CC.finditer(text):
        parts = m.group("parts").lower()
        flags = [f for f, pat in (("NC", r"nc\b|non-?commercial"), ("ND", r"nd\b|no-?deriv"),
                                  ("SA", r"sa\b|share-?alike")) if re.search(pat, parts)]
        ver = m.group("ver")
        if ver and "." not in ver:
            ver += ".0"
        if "ND" in flags and "SA" in flags:
            flags.remove("SA")  # not a combination CC publishes
        out.append("-".join(["CC-BY", *flags, ver]) if ver else "-".join(["CC-BY", *flags]) + "-unversioned")
    return list(dict.fromkeys(out))


# --- choice between licenses ----------------------------------------------------------------------

_LATER = re.compile(r"or\s*\(?\s*at\s+your\s+option\s*\)?\s*any\s+later\s+version", re.IGNORECASE)
_CHOICE = re.compile(r"\bdual[\s-]*licen[cs]|\bmulti[\s-]*licen[cs]|\beither\b|\bat\s+your\s+(?:option|choice|discretion)|"
                     r"\b(?:you\s+(?:may|can)\s+)?choose\b|\balternatively\b|\bwhichever\b|\bone\s+of\s+the\s+following\b",
                     re.IGNORECASE)
_OR_WORD = re.compile(r"\bor\b", re.IGNORECASE)


def offers_choice(text: str, *, short: bool = False) -> bool:
    """Does a statement offer its licenses as alternatives? In a short name (`MIT or Apache 2.0`) a bare
    `or` counts; in prose only explicit cues do ("or (at your option) any later version" is not one)."""
    text = _LATER.sub(" ", text)
    return bool(_CHOICE.search(text) or (short and _OR_WORD.search(text)))
