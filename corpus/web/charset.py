"""Bytes of an HTML page -> str, by the charset the server or the page declares, else by detection.

Order (as browsers do, minus the sniffing they do for legacy pages): a byte-order mark; the HTTP
`Content-Type` charset; a `<meta charset>` or `<meta http-equiv=Content-Type>` in the first 4 KiB;
else strict UTF-8 (most of the web); else a statistical guess (resiliparse's detector, which wraps
uchardet). A declared charset that does not decode the bytes cleanly falls through to the next step,
because servers often lie. The last resort is cp1252 with replacement characters, so this never fails.
"""

from __future__ import annotations

import codecs
import re

_HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?\s*([\w.:-]+)", re.I)
_META_CHARSET = re.compile(rb"<meta[^>]{0,200}?charset\s*=\s*[\"']?\s*([\w.:-]+)", re.I)
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
# Labels that mean something else in practice (WHATWG encoding spec): latin-1 pages are cp1252.
_ALIASES = {"iso-8859-1": "cp1252", "latin1": "cp1252", "latin-1": "cp1252", "us-ascii": "cp1252",
            "ascii": "cp1252", "x-sjis": "shift_jis", "gb2312": "gb18030", "gbk": "gb18030"}


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    label = label.strip().lower()
    label = _ALIASES.get(label, label)
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


def declared_charsets(content: bytes, content_type: str | None) -> list[str]:
    """Codecs named by the BOM, the HTTP header and the page, in that order (duplicates removed)."""
    found = []
    for bom, name in _BOMS:
        if content.startswith(bom):
            found.append(name)
    if content_type:
        m = _HEADER_CHARSET.search(content_type)
        if m:
            found.append(_codec(m.group(1)))
    m = _META_CHARSET.search(content[:4096])
    if m:
        found.append(_codec(m.group(1).decode("ascii", "ignore")))
    return list(dict.fromkeys(c for c in found if c))


def decode_html(content: bytes, content_type: str | None = None) -> tuple[str, str]:
    """(text, how) where `how` names the codec and its source, e.g. `utf-8 (header)`."""
    for codec in declared_charsets(content, content_type):
        try:
            return content.decode(codec), f"{codec} (declared)"
        except (UnicodeDecodeError, LookupError):
            continue
    try:
        return content.decode("utf-8"), "utf-8 (valid)"
    except UnicodeDecodeError:
        pass
    from resiliparse.parse.encoding import detect_encoding

    guess = _codec(detect_encoding(content[:65536]))
    if guess:
        try:
            return content.decode(guess), f"{guess} (detected)"
        except (UnicodeDecodeError, LookupError):
            pass
    return content.decode("cp1252", errors="replace"), "cp1252 (fallback)"
