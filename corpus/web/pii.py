"""Finding personal data in text: candidates by regular expression, then checks that cut false
positives (Luhn for payment cards, mod-97 for IBANs, SSA rules for US social security numbers,
`ipaddress` for IP addresses, digit counts for phone numbers).

`find_pii(text)` returns non-overlapping spans; where candidates overlap, the more specific
category wins (an IBAN or card number also looks like a phone number).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

CATEGORIES = ("iban", "card", "ssn", "email", "ip", "phone")  # priority order for overlaps
PLACEHOLDERS = {"email": "<EMAIL>", "phone": "<PHONE>", "ip": "<IP_ADDRESS>", "card": "<CARD_NUMBER>",
                "ssn": "<US_SSN>", "iban": "<IBAN>"}

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@(?:[A-Za-z0-9-]{1,63}\.)+[A-Za-z]{2,24}(?![\w-])")
_IPV4 = re.compile(r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?!\w|\.\d)")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){2,7}(?::|[0-9A-Fa-f]{1,4}|(?::[0-9A-Fa-f]{1,4}){1,6})(?![\w:])"
                   r"|(?<![\w:])::(?:[0-9A-Fa-f]{1,4}:){0,6}[0-9A-Fa-f]{1,4}(?![\w:])")
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
_SSN = re.compile(r"(?<![\d-])(\d{3})[- ](\d{2})[- ](\d{4})(?![\d-])")
_IBAN = re.compile(r"(?<![A-Z0-9])([A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?)(?![A-Z0-9])")
_PHONE = re.compile(r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]\d{2,4}){1,5}(?![\w])"
                    r"|(?<![\w+])\+\d{8,14}(?!\w)")

# IBAN length per country (ISO 13616 registry), for the countries most seen on the web.
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
    "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24,
    "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21,
    "HU": 28, "IE": 22, "IL": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LI": 21,
    "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30,
    "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24,
    "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TN": 24, "TR": 26, "UA": 29, "VG": 24, "XK": 20,
}


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    category: str


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def card_ok(candidate: str) -> bool:
    digits = re.sub(r"\D", "", candidate)
    if not 13 <= len(digits) <= 19 or not luhn_ok(digits) or len(set(digits)) == 1:
        return False
    # Issuer prefixes (Visa, Mastercard, Amex, Discover, JCB, Diners, UnionPay, Maestro).
    return bool(re.match(r"4|5[1-5]|2[2-7]|3[47]|6011|64[4-9]|65|35|30[0-5]|36|38|62|50|5[6-8]|6[3-9]", digits))


def ssn_ok(area: str, group: str, serial: str) -> bool:
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def iban_ok(candidate: str) -> bool:
    iban = candidate.replace(" ", "")
    if _IBAN_LENGTHS.get(iban[:2]) != len(iban):
        return False
    rearranged = iban[4:] + iban[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def phone_ok(candidate: str) -> bool:
    digits = sum(c.isdigit() for c in candidate)
    if candidate.startswith("+"):
        return 8 <= digits <= 15
    return 10 <= digits <= 13 and any(c in candidate for c in " .-()")


def ip_ok(candidate: str) -> bool:
    try:
        ipaddress.ip_address(candidate)
    except ValueError:
        return False
    return True


def _candidates(text: str):
    if "@" in text:
        for m in _EMAIL.finditer(text):
            yield Span(m.start(), m.end(), "email")
    if not any(c.isdigit() for c in text):
        return
    for m in _IBAN.finditer(text):
        if iban_ok(m.group(1)):
            yield Span(m.start(1), m.end(1), "iban")
    for m in _CARD.finditer(text):
        if card_ok(m.group()):
            yield Span(m.start(), m.end(), "card")
    for m in _SSN.finditer(text):
        if ssn_ok(*m.groups()):
            yield Span(m.start(), m.end(), "ssn")
    if "." in text:
        for m in _IPV4.finditer(text):
            yield Span(m.start(), m.end(), "ip")
    if "::" in text or text.count(":") >= 3:
        for m in _IPV6.finditer(text):
            if ip_ok(m.group()):
                yield Span(m.start(), m.end(), "ip")
    for m in _PHONE.finditer(text):
        if phone_ok(m.group()):
            yield Span(m.start(), m.end(), "phone")


def find_pii(text: str, categories: tuple[str, ...] = CATEGORIES) -> list[Span]:
    """Non-overlapping spans in text order; on overlap the category earlier in CATEGORIES wins."""
    rank = {c: i for i, c in enumerate(CATEGORIES)}
    found = sorted((s for s in _candidates(text) if s.category in categories),
                   key=lambda s: (rank[s.category], s.start))
    taken: list[Span] = []
    for span in found:
        if all(span.end <= t.start or span.start >= t.end for t in taken):
            taken.append(span)
    return sorted(taken, key=lambda s: s.start)


def redact(text: str, spans: list[Span], placeholders: dict[str, str] = PLACEHOLDERS) -> str:
    out, pos = [], 0
    for span in spans:
        out.append(text[pos:span.start])
        out.append(placeholders[span.category])
        pos = span.end
    out.append(text[pos:])
    return "".join(out)
