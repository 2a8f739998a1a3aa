"""Phone numbers in free text, international and national.

A candidate is a run of digit groups joined by separators (space, dot, dash, slash, a bracketed
area code or "(0)"), with an optional `+`/`00` prefix and extension ("x4587", "ext. 12"). It is
kept when it has the structure of a phone number or a phone word is near it:

- international (`+44 20 7946 0958`, `0049 30 1234567`, `+4915112345678`): the country code and
  length must be possible for that country (Google's libphonenumber metadata, `phonenumbers`);
  a run that swallowed the next number is cut back group by group until it is;
- national: a trunk prefix (`030 1234567`, `01632 960123`, `0101234056`, `8 912 345 67 89`), a
  bracketed area code (`(11) 2345-6789`), the North American 3-3-4 shape, `X-XXXX-XXXX`
  (`03-1234-5678`), a toll-free prefix (`1800 123 456`), or 1-NXX-NXX-XXXX without separators;
- anything else (`2345 6789`, `912 34 56 78`) needs a phone word before it ("tel", "call", "fax",
  "WhatsApp", "電話", "тел", ...) or right after it on the same line ("(mobile)", "-Office"); 5-6
  digit numbers need one right before them.
- a cue right beside the number is enough for any national length (7-13 digits): a label ending
  at the number ("Desk: 5403926876", "Büro: 89 1234 567", "my registered 668 5702", "reach me at",
  "answering at", "número:") or a line type right after it ("8211-Office", "(85) 5986-8343-Office").
  With a cue after it, a run that starts with a 5-digit postcode ("92151 24 428557-Office") is cut
  to the number after it.

Never a phone: more than 15 digits, a date or date-time (`2025-03-11 11:41`), a time next to it
(`:41`), year ranges, opening hours, a version ("version 10.0.19041.1"), ISBN shapes, ZIP+4, and
numbers right after words that name another identifier (ISBN, order, invoice, ...) unless a phone
word is as close. Boundaries are ASCII, so a number touching CJK text is still found.
"""

from __future__ import annotations

import re

import phonenumbers

_SEP = r"(?:[ .\-/\u00a0]|[ \t]?[-–][ \t]?|[ \t.\-]?\(\d{1,5}\)[ \t.\-]?)"  # never across a line break
PHONE = re.compile(
    r"(?<![0-9A-Za-z_+/.\-])"
    r"(?P<num>(?:\+\s?|00|\(\s?\+?\d{1,5}\s?\)[\s.\-/]?)?\d{1,15}(?:" + _SEP + r"\d{1,12}){0,7})"
    r"(?P<ext>\s?(?i:x|ext\.?|extn?\.?|extension|#|доб\.?|内線)\s?\d{1,6})?"
    r"(?![0-9A-Za-z_]|[.\-/:]\d)"
)

_CLUSTER = re.compile(r"\d[\d \-.()/\u00a0–+:]{3,}")

# Words that announce a phone number (lower case; the window before the number is lower-cased):
# nouns within 60 characters, verbs ("call", "ring") within 25.
_CUE_NOUN = re.compile(
    r"(?:\b(?:tel(?! aviv)|tél|tele?phone|téléphone|telefon|telefono|teléfono|telefone|telf|tlf|tfno|phone|phones|ph|"
    r"mob|mobile|mobil|móvil|cel|cell|cellphone|celular|handy|fax|sms|whatsapp|viber|telegram|hotline|helpline|"
    r"toll[- ]free|freephone|rufnummer|contact|contacts)\b"
    r"|(?:^|[\s(|,;])[tpmfoch]\s?:\s*$|電話|电话|手机|手機|携帯|연락처|전화|тел|моб|факс|☎|📞|✆|📱)"
)
_CUE_VERB = re.compile(r"\b(?:call|calling|ring|dial|dialing|text|reach|contacting|office|appointments?|"
                       r"reservations?|enquiries|inquiries|bookings?)\b")
_SHORT_CUE = re.compile(r"(?:\b(?:tel|phone|call|dial|fax|mobile|ring|hotline|whatsapp)\b|电话|電話|тел)[\W\s]*$")
_TIME_RANGE = re.compile(r"^\d{1,2}[.:]\d\d\s?[-–]\s?\d{1,2}[.:]\d\d$")
_ZIP4 = re.compile(r"^\d{5}-\d{4}$")
_LINE_TYPES = r"(?:mobile|mob|cell|cellular|fax|tel|phone|office|home|work|desk|direct|landline|main|toll[- ]free)"
_CUE_AFTER = re.compile(r"^(?:[ \t]?\(?|[ \t]?[-–/|][ \t]?)" + _LINE_TYPES + r"\b")
# A label or phrase that ends right where the number starts (the lower-cased 40 characters before it).
_CUE_BESIDE = re.compile(
    r"(?:\b(?:tel|tél|phone|telephone|mobile|mob|cell|cellphone|fax|desk|hotline|landline|whatsapp|sms|"
    r"telefon|telefono|teléfono|telefone|téléphone|handy|mobil|móvil|movil|celular|cellulare|portable|"
    r"rufnummer|durchwahl|centralino|tlf|tfno|telf)\.?\s?[:#=]?"  # phone words: with or without a colon
    r"|\b(?:office|direct|line|work|home|main|contact|fixe|bureau|büro|buero|oficina|ufficio|escritório|"
    r"kontakt|contacto|contato|recepción|ramal)\s?[:#]"  # words that are labels only with a colon
    r"|\b(?:answering|reachable|reach|call|ring|text|dial|phone|contact|message|sms|whatsapp)\s(?:me|us|him|her|them|you)?"
    r"\s?(?:at|on|via)"
    r"|\b(?:my|your|his|her|our|their)\s(?:number|registered|new|old|personal|private|direct|work|home|office|"
    r"cell|mobile|contact|business|phone|landline)(?:\s(?:number|phone|line|no\.?))?(?:\s(?:is|was))?\s?:?"
    r"|\b(?:llámame|llame|llamar|ligue|appelez|anrufen|chiamare|chiama|звоните|позвоните)"
    r"(?:\s(?:al|a|au|unter|al numero))?"
    r"|電話|电话|手机|手機|携帯|연락처|전화|тел\.?|моб\.?|номер|факс|☎|📞|✆|📱)\s*[:：.\-–]?\s*$"
)
_OTHER_ID = re.compile(
    r"\b(?:isbn(?:-1[03])?|issn|doi|pmid|order|invoice|ref|reference|sku|id|no|nr|account|acct|serial|patent|case|ticket|"
    r"tracking|zip|postcode|postal|lot|item|model|part|vat|ein|tax|registration|reg|abn|acn|siret|siren|"
    r"routing|swift|bic|iban|version|ver|release|build|firmware|kernel|rev|revision|v)\W{0,3}$"
    r"|[#№$€£¥]\s?$"
)
_VERSION = re.compile(r"\b(?:version|ver|release|build|firmware|v)\W{0,2}$")


_TOLL_FREE = frozenset("800 888 877 866 855 844 833 1800 1300 0800 0808 0500 1-800".split())


def _is_year(g: str) -> bool:
    return len(g) == 4 and ("1000" <= g <= "2099")


def _is_date(groups: list[str]) -> bool:
    """Some three consecutive groups read as Y-M-D, D-M-Y or M-D-Y with a 4-digit year."""
    for a, b, c in zip(groups, groups[1:], groups[2:]):
        if _is_year(a) and len(b) <= 2 and len(c) <= 2 and 1 <= int(b) <= 12 and 1 <= int(c) <= 31:
            return True
        if _is_year(c) and len(a) <= 2 and len(b) <= 2 and 1 <= int(a) <= 31 and 1 <= int(b) <= 31 \
                and min(int(a), int(b)) <= 12:
            return True
    return False


def _possible_international(num: str) -> bool:
    s = num.strip()
    if s.startswith("00"):
        s = "+" + s[2:]
    s = s.replace("(+", "+").replace("( +", "+")
    try:
        parsed = phonenumbers.parse(s, None)
    except phonenumbers.NumberParseException:
        return False
    return phonenumbers.is_possible_number(parsed)


def _national_structure(num: str, groups: list[str], n_digits: int) -> bool:
    first = groups[0]
    if len(groups) < 2:  # no separators: 1-NXX-NXX-XXXX (18008608747), toll free, or a trunk prefix
        if n_digits == 11 and first[0] == "1" and first[1] in "23456789":
            return True
        if n_digits == 10 and first[:3] in _TOLL_FREE:
            return True
        return 9 <= n_digits <= 11 and first[0] == "0" and first[1] != "0" and len(set(first)) > 3
    if first in _TOLL_FREE and n_digits >= 9 + (len(first) == 3):
        return True
    if "(" in num and re.search(r"\(\d{2,5}\)", num) and n_digits >= 8:
        return True  # bracketed area code
    lens = [len(g) for g in groups]
    if first == "8" and n_digits == 11 and len(groups) >= 3:
        return True  # Russian/Kazakh trunk prefix 8 (8 912 345 67 89)
    if len(groups) == 3 and lens[1:] in ([4, 4], [5, 4]) and 10 <= n_digits <= 11 and "-" in num:
        return True  # East Asian and Brazilian X-XXXX-XXXX (03-1234-5678, 010-1234-5678, 11 91234-5678)
    if lens[-3:] == [3, 3, 4] and n_digits in (10, 11) and (n_digits == 10 or groups[0] == "1"):
        return True  # North American 3-3-4
    if first[0] == "0" and 9 <= n_digits <= 13 and (2 <= len(first) <= 6 or (first == "0" and n_digits >= 10)):
        return first != "00"  # national trunk prefix + 1-5 digit area code
    return False


def digit_windows(text: str) -> list[tuple[int, int]]:
    """Merged (start, end) around runs of digits joined by phone/card separators that hold 5+ digits
    or look like an IPv4 address: the only places the number patterns can match, so the slower
    patterns scan these instead of the whole text."""
    out: list[tuple[int, int]] = []
    for m in _CLUSTER.finditer(text):
        run = m.group()
        if sum(map(str.isdigit, run)) < 5 and run.count(".") < 3:
            continue
        start, end = max(0, m.start() - 3), min(len(text), m.end() + 12)  # room for " ext. 214"
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def iter_windows(pattern: re.Pattern, text: str, windows):
    for start, end in windows:
        yield from pattern.finditer(text, start, end)


def phone_spans(text: str, windows=None) -> list[tuple[int, int, str]]:
    """(start, end, rule) of the phone numbers in text; rule = the evidence that made it one:
    "international", "national_structure", "cue_beside", "cue_after" or "cue_word"."""
    out = []
    for m in iter_windows(PHONE, text, digit_windows(text) if windows is None else windows):
        num = m.group("num")
        groups = re.findall(r"\d+", num)
        n_digits = sum(map(len, groups)) - 2 * num.startswith("00")
        start, end = m.start(), m.end()
        while n_digits > 15 and len(groups) > 2 and num.startswith(("+", "00", "(+")):
            n_digits -= len(groups.pop())  # an international number run into the next number
            num = num[:list(re.finditer(r"\d+", num))[-1].start()].rstrip(" .-/\u00a0(")
            end = start + len(num)
        line_before = text[max(0, start - 40):start]
        line_before = line_before[line_before.rfind("\n") + 1:].lower()
        beside = bool(_CUE_BESIDE.search(line_before.replace('"', "").replace("'", "")))  # "phone": "..."
        after = bool(_CUE_AFTER.match(text[end:end + 16].lower()))
        if after and not beside and not num.startswith(("+", "00", "(")) and len(groups) >= 3 \
                and len(groups[0]) == 5 and groups[0][0] != "0" and n_digits - 5 >= 7 and num[5] == " ":
            # "92151 24 428557-Office": a postcode before the number the line type names
            n_digits -= 5
            groups.pop(0)
            start += 6
            num = num[6:]
        if not 5 <= n_digits <= 15:
            continue
        if start >= 2 and text[start - 1] in ":," and text[start - 2].isdigit():
            continue  # 11:41 2025 ..., $1,500.00 (49)
        if len(groups) == 1 and (groups[0] in "01234567890123456789" or groups[0] in "98765432109876543210"):
            continue  # 0123456789: a run of digits, not a number
        quoted = start >= 1 and text[start - 1] in "\"'" and text[end:end + 1] in "\"'"
        if _is_date(groups) or (len(groups) == 2 and _is_year(groups[0]) and _is_year(groups[1])):
            continue
        if all(_is_year(g) for g in groups) or (len(groups) == 2 and "–" in num) or _TIME_RANGE.match(num):
            continue  # years, ranges, opening hours (08.00 - 12.00)
        if re.search(r"\((?:1[89]|20)\d\d\)", num):
            continue  # a year in brackets ("20 (2013) 11"), not an area code
        before = text[max(0, start - 60):start].lower()
        if "\n" in before:
            before = before[before.rindex("\n") + 1:]
        near = before[-16:]
        if _ZIP4.match(num) and not _CUE_NOUN.search(near):
            continue  # US ZIP+4 (98034-6944)
        cue = bool(beside or after or _CUE_NOUN.search(before) or _CUE_VERB.search(before[-25:]))
        if _OTHER_ID.search(near) and not (beside or _CUE_NOUN.search(near) or _CUE_VERB.search(near)):
            continue
        if n_digits == 13 and groups[0][:3] in ("978", "979") and len(groups) in (1, 4, 5):
            continue  # ISBN-13 shape
        if n_digits in (10, 13) and len(groups) >= 4 and len(groups[-1]) == 1 and "-" in num and " " not in num:
            continue  # ISBN-10 shape (0-306-40615-2)
        if _VERSION.search(near) and "." in num:
            continue
        international = num.startswith(("+", "(+", "( +")) or (num.startswith("00") and num[2:3] not in ("0", ""))
        if international:
            ok = 6 <= n_digits <= 15 and _possible_international(num)
            while not ok and len(groups) > 2 and n_digits - len(groups[-1]) >= 6:
                # a run may join a number to its neighbour ("+678 591 2090 2204 ...")
                n_digits -= len(groups.pop())
                last = list(re.finditer(r"\d+", num))[-1]
                num = num[:last.start()].rstrip(" .-/\u00a0(")
                end = start + len(num)
                ok = _possible_international(num)
        else:
            ok = n_digits <= 13 and _national_structure(num, groups, n_digits)
        if quoted and len(groups) == 1 and not international and not beside:
            continue  # "rValueUID":"12097489011": an id in data or code, unless its key names a phone
        if n_digits < 7:  # short numbers (small countries, short codes) only right after a phone word
            if not ((international and ok) or (_SHORT_CUE.search(text[max(0, start - 12):start].lower())
                                               and num.count(".") != 1)):
                continue
        if ok or cue:
            rule = ("international" if international else "national_structure") if ok else \
                "cue_beside" if beside else "cue_after" if after else "cue_word"
            out.append((start, end, rule))
    return out
