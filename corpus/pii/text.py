"""Personal data in text: emails, phone numbers, IP addresses, payment cards, US SSNs, IBANs.

Candidates come from regular expressions with ASCII boundaries (so values touching CJK text are
found), then checks cut false positives: Luhn + IIN table for cards (checks.py), mod-97 and the
country's length for IBANs (any letter case), SSA rules for SSNs, `ipaddress` for IPs, and for
phones the structure or cue rules of phones.py.

Each span says whether its evidence is strong enough to drop a whole document on: a card needs a
card word near it ("visa", "card", "cvv", ...) or the network's printed grouping (4-4-4-4,
4-6-5); an SSN needs an SSN word near it ("SSN", "social security"). Other categories are always
strong. Where candidates overlap, the category earlier in CATEGORIES wins.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from .checks import IBAN_LENGTHS, card_network, iban_ok, ssn_ok
from .phones import digit_windows, iter_windows, phone_spans

CATEGORIES = ("iban", "card", "ssn", "email", "ip", "phone")  # priority order for overlaps
PLACEHOLDERS = {"email": "<EMAIL>", "phone": "<PHONE>", "ip": "<IP_ADDRESS>", "card": "<CARD_NUMBER>",
                "ssn": "<US_SSN>", "iban": "<IBAN>"}

# The one email rule (also used by code_secrets): ASCII boundaries, a dotted domain, a letter TLD
# that is not a file extension ("icon@2x.png").
EMAIL = re.compile(r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}@"
                   r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}"
                   r"(?![A-Za-z0-9\-]|\.[A-Za-z0-9])")
_URL_USER = re.compile(r"://[^\s/@]{0,64}:$")  # user:password@host in a URL is not an address
_FILE_TLDS = frozenset("png jpg jpeg gif svg webp bmp ico tif tiff js mjs css scss json html htm xml lock map "
                       "min pdf zip gz".split())
# RFC 2606 / 6761 names reserved for documentation and tests.
_TEST_DOMAIN = re.compile(r"(?:^|\.)(?:example\.(?:com|org|net)|example|test|invalid|localhost|local)$"
                          # placeholder domains of docs and tests
                          r"|^(?:test|domain|yourdomain|mydomain|yourcompany|company|foo|bar|foobar|somewhere)\.(?:com|org|net)$"
                          r"|^foo\.bar$")
_TEST_USER = re.compile(r"^(?:test|tester|user|username|foo|someone|you|your\.?name|your[._-]?email|name)\d?$")

_IPV4 = re.compile(r"(?<![0-9A-Za-z_.\-])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}"
                   r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![0-9A-Za-z_]|\.\d)")
_IPV6 = re.compile(r"(?<![0-9A-Za-z_:.])(?=[0-9A-Fa-f]*:[0-9A-Fa-f]*:)[0-9A-Fa-f:]{3,39}(?![0-9A-Za-z_:])")
_HEX_COLONS = re.compile(r":[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{0,4}:")
_IP_NOT = re.compile(r"\b(?:v|ver|version|versions|release|released|build|firmware|kernel|rev|revision|patch|"
                     r"update|sdk|chrome|firefox|android|ios|windows|macos|oid|object identifier|arc|mib|snmp|"
                     r"section|chapter|rule|clause|article|table|figure|fig)\W{0,3}$|urn:oid:$")
_PHONE_WORD = re.compile(r"\b(?:tel|phone|fax|mobile|mob|cell|ph|call|ring|dial|whatsapp)\b|电话|電話|тел")
_IP_CUE = re.compile(r"\b(?:ip|ips|ipv4|address|addr|server|host|hostname|dns|gateway|ping|nameserver|resolver|"
                     r"from|src|dst|client|proxy|router|subnet|connect|connected|login|logged)\b")

_CARD = re.compile(r"(?<![0-9A-Za-z_.\-+])\d(?:[ \-]?\d){11,40}(?![0-9A-Za-z_]|[.\-]\d)")
_CARD_CUE = re.compile(r"\b(?:cards?|credit|debit|visa|master\s?card|amex|american express|discover|jcb|maestro|"
                       r"diners|unionpay|mir|rupay|cc|ccn|cvv|cvc|pan|payment|paid|pay|kreditkarte|karte|carte|"
                       r"tarjeta|cartão|carta)\b|カード|卡号|卡號|карт")
_CARD_GROUPINGS = {(4, 4, 4, 4), (4, 6, 5), (4, 6, 4), (4, 4, 4, 4, 3), (4, 4, 4, 4, 2), (4, 4, 4, 4, 1),
                   (4, 4, 4, 3), (4, 4, 4, 2), (4, 4, 4), (4, 4, 5), (4, 4, 4, 1)}

_SSN_DASHED = re.compile(r"(?<![0-9A-Za-z_\-])(\d{3})-(\d{2})-(\d{4})(?![0-9A-Za-z_]|-\d)")
_SSN_OTHER = re.compile(r"(?<![0-9A-Za-z_\-])(\d{3}) ?(\d{2}) ?(\d{4})(?![0-9A-Za-z_\-])")
_SSN_CUE = re.compile(r"\b(?:ssn|ssns|social security|soc\.? ?sec\.?|ss ?#|ss no|ssa|taxpayer id)")

# Found by its check digits first (a cheap scan for digits), then the two letters before them.
_IBAN = re.compile(r"\d\d(?<=[A-Za-z]{2}\d\d)(?<![0-9A-Za-z_][A-Za-z]{2}\d\d)[ \-]?[A-Za-z0-9]{2}(?:[ \-]?[A-Za-z0-9]){8,30}")


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    category: str
    strong: bool = True  # enough evidence to drop the document on (cards and SSNs need a cue or a check)
    rule: str = ""  # the evidence: "luhn+iin", "mod97", "phone:cue_beside", ...


def is_test_email(address: str) -> bool:
    """Documentation and test addresses: example.com/org/net, *.test, *.example, localhost,
    placeholder domains (yourdomain.com, foo.com) and users (test@, user@, you@)."""
    user, _, domain = address.lower().rpartition("@")
    return bool(_TEST_DOMAIN.search(domain) or _TEST_USER.match(user))


# the run of local-part characters just before an "@", read backwards (one more than the longest local part)
_LOCAL_RUN_REV = re.compile(r"[A-Za-z0-9._%+\-]{0,65}")


def _email_matches(text: str):
    """EMAIL.finditer(text), found from each "@": the local part is the whole run of local-part characters
    before its "@" (the character before an address cannot be one), so each "@" has one possible start, and
    only that start is tried. Same matches as scanning every position of the text, which costs 5-10x more."""
    pos, at = 0, text.find("@")
    while at >= 0:
        run = _LOCAL_RUN_REV.match(text[max(0, at - 65):at][::-1]).end()
        start = at - run
        # start < pos: the run continues the previous address, so finditer would find nothing here either
        if 0 < run <= 64 and start >= pos and (m := EMAIL.match(text, start)) is not None:
            yield m
            pos = m.end()
        at = text.find("@", at + 1)


def email_spans(text: str):
    for m in _email_matches(text):
        if m.group().rsplit(".", 1)[-1].lower() not in _FILE_TLDS \
                and not _URL_USER.search(text, max(0, m.start() - 80), m.start()):
            yield m.start(), m.end()


def _window(text: str, start: int, n: int = 40) -> str:
    return text[max(0, start - n):start].lower()


def _iban_spans(text: str):
    pos = 0
    while m := _IBAN.search(text, pos):
        begin = m.start() - 2
        pos = m.start() + 2
        length = IBAN_LENGTHS.get(text[begin:m.start()].upper())
        if length is None:
            continue
        chars, end = 0, begin
        for i in range(begin, m.end()):  # exactly the country's length in characters, ignoring separators
            if text[i].isalnum():
                chars += 1
                if chars == length:
                    end = i + 1
                    break
        if chars == length and not (end < len(text) and text[end].isascii() and text[end].isalnum()) \
                and iban_ok(text[begin:end]):
            pos = end
            yield begin, end


def _card_spans(text: str, windows):
    """Runs of digit groups; the longest contiguous groups that make a card (a run may join a
    card to a neighbouring number: "exp 04/27 2131 965372 13836")."""
    for m in iter_windows(_CARD, text, windows):
        parts = [(m.start() + g.start(), m.start() + g.end()) for g in re.finditer(r"\d+", m.group())]
        i = 0
        while i < len(parts):
            for j in range(len(parts), i, -1):
                start, end = parts[i][0], parts[j - 1][1]
                digits = re.sub(r"\D", "", text[start:end])
                if len(digits) < 12:
                    j = i
                    break
                if len(digits) <= 19 and card_network(digits):
                    yield start, end
                    break
            i = j if j > i else i + 1


def _ip_spans(text: str, windows):
    if "." in text:
        for m in iter_windows(_IPV4, text, windows):
            before = _window(text, m.start(), 30)
            if _IP_NOT.search(before[-20:]):
                continue
            octets = m.group().split(".")
            if not _IP_CUE.search(before) and (all(len(o) == 1 for o in octets)
                                               or all(len(o) <= 2 for o in octets) and _PHONE_WORD.search(before[-15:])):
                continue  # "2.8.1.1" reads as a version, "Tel 20.49.19.33" as a phone, unless the text says IP
            yield m.start(), m.end()
    if "::" in text or _HEX_COLONS.search(text):
        for m in _IPV6.finditer(text):
            try:
                ipaddress.ip_address(m.group())
            except ValueError:
                continue
            if m.group().count(":") == 7 or sum(bool(g) for g in m.group().split(":")) >= 3:
                yield m.start(), m.end()  # full, or compressed with 3+ groups ("a::b" is not an address)


def _candidates(text: str, categories):
    if "email" in categories:
        for start, end in email_spans(text):
            yield Span(start, end, "email", True, "email")
    windows = digit_windows(text)
    if not windows:  # no digit runs: only IPv6 addresses written with few digits can be here
        if "ip" in categories:
            for start, end in _ip_spans(text, windows):
                yield Span(start, end, "ip", True, "ipv6")
        return
    if "iban" in categories:
        for start, end in _iban_spans(text):
            yield Span(start, end, "iban", True, "iban:length+mod97")
    if "card" in categories:
        for start, end in _card_spans(text, windows):
            groups = tuple(len(g) for g in re.split(r"[ \-]", text[start:end]))
            strong = groups in _CARD_GROUPINGS or bool(_CARD_CUE.search(_window(text, start)))
            yield Span(start, end, "card", strong, "card:luhn+iin" + ("+grouping" if groups in _CARD_GROUPINGS else "")
                       + ("+cue" if _CARD_CUE.search(_window(text, start)) else ""))
    if "ssn" in categories:
        for m in iter_windows(_SSN_DASHED, text, windows):
            if ssn_ok(*m.groups()):
                cued = bool(_SSN_CUE.search(_window(text, m.start())))
                yield Span(m.start(), m.end(), "ssn", cued, "ssn:dashed" + ("+cue" if cued else ""))
        for m in iter_windows(_SSN_OTHER, text, windows):
            if "-" not in m.group() and ssn_ok(*m.groups()) and _SSN_CUE.search(_window(text, m.start(), 30)):
                yield Span(m.start(), m.end(), "ssn", True, "ssn:cue")
    if "ip" in categories:
        for start, end in _ip_spans(text, windows):
            yield Span(start, end, "ip", True, "ip")
    if "phone" in categories:
        for start, end, rule in phone_spans(text, windows):
            yield Span(start, end, "phone", True, f"phone:{rule}")


def find_pii(text: str, categories: tuple[str, ...] = CATEGORIES) -> list[Span]:
    """Non-overlapping spans in text order; on overlap the category earlier in CATEGORIES wins."""
    rank = {c: i for i, c in enumerate(CATEGORIES)}
    found = sorted(_candidates(text, categories), key=lambda s: (rank[s.category], s.start))
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
