"""License text normalisation: the same function turns reference texts and repository files into
comparable word sequences.

Following the SPDX matching guidelines (case, quotes, dashes, bullets, copyright lines and
equivalent spellings do not change which license a text is), plus markup removal for the
Markdown/HTML license files real repositories carry.
"""

from __future__ import annotations

import html
import re

_TAG = re.compile(r"<[^>\n]{0,200}>")
_MD_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")
_COPYRIGHT_LINE = re.compile(
    r"^[\s#*/;!>-]*(copyright\b\s*(\(c\)|©|\d{4}|by\b|[a-z ,.]*\d{4})|\(c\)\s*\d{4}|©).*$",
    re.IGNORECASE | re.MULTILINE)
_RIGHTS = re.compile(r"all rights reserved\.?", re.IGNORECASE)
_LIST_MARKER = re.compile(r"^\s*(?:[-*+•]|\(?(?:\d{1,2}|[a-z]|[ivx]{1,4})[.)])\s+", re.IGNORECASE | re.MULTILINE)
_WORD = re.compile(r"[a-z0-9]+\+?")  # `gplv2+`: the plus means "or later"
_QUOTES = re.compile("[\"'`‘’“”«»„]")

# SPDX equivalent words (equivalentwords.txt), single-word pairs only: variant -> canonical.
_EQUIVALENT = {
    "acknowledgment": "acknowledgement", "analogue": "analog", "analyse": "analyze", "artefact": "artifact",
    "authorisation": "authorization", "authorised": "authorized", "calibre": "caliber", "cancelled": "canceled",
    "catalogue": "catalog", "categorise": "categorize", "centre": "center", "emphasised": "emphasized",
    "favour": "favor", "favourite": "favorite", "fulfil": "fulfill", "fulfilment": "fulfillment",
    "initialise": "initialize", "judgment": "judgement", "labelling": "labeling", "labour": "labor",
    "licence": "license", "licences": "licenses", "licenced": "licensed", "maximise": "maximize",
    "merchantibility": "merchantability", "modelled": "modeled", "modelling": "modeling", "offence": "offense",
    "optimise": "optimize", "organisation": "organization", "organise": "organize", "practise": "practice",
    "programme": "program", "realise": "realize", "recognise": "recognize", "signalling": "signaling",
    "sublicence": "sublicense", "utilisation": "utilization", "whilst": "while", "wilful": "wilfull",
    "noncommercial": "non-commercial", "percent": "per cent", "owner": "holder",
}


def normalize(text: str, *, strip_copyright: bool = True) -> str:
    """Lower-cased text without markup, quotes, bullets, copyright lines; newlines kept."""
    text = text.replace("\ufeff", "").replace("\r\n", "\n").replace("\r", "\n")
    text = _MD_LINK.sub(r"\1", text)
    text = _TAG.sub(" ", text)
    text = html.unescape(text)
    if strip_copyright:
        text = _COPYRIGHT_LINE.sub("", text)
        text = _RIGHTS.sub(" ", text)
    text = _LIST_MARKER.sub(" ", text)
    text = _QUOTES.sub(" ", text).lower()
    text = re.sub(r"https?://", "", text)
    return text


def words(text: str, *, strip_copyright: bool = True) -> list[str]:
    """The word sequence of a license text after normalisation (equivalent spellings unified)."""
    out = []
    for w in _WORD.findall(normalize(text, strip_copyright=strip_copyright)):
        w = _EQUIVALENT.get(w, w)
        out.extend(w.split(" ")) if " " in w else out.append(w)
    return out


def front_matter(raw: str) -> tuple[dict[str, str], str]:
    """Split a ScanCode `---\\nkey: value\\n---\\nbody` file into (flat top-level keys, body)."""
    if not raw.startswith("---"):
        return {}, raw
    end = raw.find("\n---", 3)
    if end < 0:
        return {}, raw
    meta = {}
    for line in raw[3:end].splitlines():
        if line and not line.startswith((" ", "-", "\t")) and ":" in line:
            key, _, value = line.partition(":")
            meta[key.strip()] = value.strip().strip("'\"")
    return meta, raw[end + 4:]
