"""Labelled text for `cidermill eval data pii`, built independently of corpus/pii (its own network
table, IBAN list and formats; no detector code is imported here).

- formats: every region of libphonenumber's metadata (fixed line, mobile, toll free), each number
  moved off the example by changing its last digits (kept only when libphonenumber still calls it
  valid), written the ways people write them (E.164, international, national, dots, dashes, no
  separators, `00` prefix, `(0)`, extensions), in sentences with and without a phone word; cards of
  every network; IBANs of every registry country in print, compact and lower case; emails, IPv4/6
  and SSNs in the forms of forms, logs and letters. Some values touch CJK text.
- lookalikes: dates and date-times, times, ranges, versions, OIDs, prices, order/tracking numbers,
  ISBNs, coordinates, postcodes, unix times, scores: every detection there is a false positive.
"""

from __future__ import annotations

import random
import re
import string

import phonenumbers

NAMES = ["Ana Lima", "Wei Chen", "Fatima Khan", "Olga Ivanova", "James Brown", "Priya Patel", "Lars Nilsson",
         "Kenji Sato", "Amara Okafor", "Diego Ruiz", "Marie Dubois", "Jonas Weber"]
CITIES = ["Lisbon", "Shenzhen", "Lahore", "Kazan", "Leeds", "Pune", "Malmo", "Osaka", "Lagos", "Bogota", "Lyon", "Graz"]

PHONE_CUED = ["Call us at {v} for a quote.", "Tel.: {v}", "Phone: {v} (Mon-Fri).", "For bookings ring {v}.",
              "Mobile {v}, after 6 pm.", "Fax: {v}", "You can reach {name} on WhatsApp at {v}.",
              "Téléphone : {v}", "Telefon: {v}", "电话：{v}", "お問い合わせ：電話{v}まで", "Тел.: {v}",
              "Contact {name} at {v} or by email.", "Hotline {v}", "{name} (mobile: {v})",
              "Questions? Phone {name} on {v}.", "T: {v} | F: on request", "Call {v} today!",
              "联系电话{v}。", "Please text or call {v} to RSVP."]
PHONE_UNCUED = ["{name}, {city}, {v}.", "{name} {v}", "Our {city} branch: {v}.", "Ask for {name} — {v}.",
                "{city} {v}"]
EMAIL_TEMPLATES = ["Write to {v}.", "Email: {v}", "Contact {name} <{v}>.", "邮箱：{v}。", "mailto:{v}",
                   "Send your CV to {v} by Friday.", "From: {name} <{v}>", "{name} ({v}) replied."]
IP_TEMPLATES = ["Failed password for root from {v} port 22 ssh2", "Connection from {v} refused.",
                "The server is at {v}.", "GET /admin HTTP/1.1 from {v}", "Nmap scan report for {v}",
                "{v} - - [11/Mar/2025:11:41:02 +0000] \"GET / HTTP/1.1\" 200", "Set the gateway to {v}.",
                "ping {v}", "Your IP address is {v}."]
CARD_CUED = ["Card number: {v}", "Pay with Visa {v}.", "CC: {v} exp 04/27", "My credit card is {v}.",
             "Kreditkarte {v}", "card {v} cvv 123"]
CARD_UNCUED = ["{v}", "Use {v} at checkout.", "Number {v} was declined."]
IBAN_TEMPLATES = ["IBAN: {v}", "Please transfer to {v} (BIC DEUTDEFF).", "Bank account {v}", "iban {v}",
                  "Überweisung an {v}.", "账户{v}。"]
SSN_TEMPLATES = ["SSN: {v}", "Social Security Number {v}", "Her SSN is {v}.", "ss# {v}", "{name}, {v}, born 1984."]

# card networks: (name, prefixes, lengths, printed grouping or None), from the networks' IIN tables
CARDS = [("visa", ["4"], [16, 13], None), ("mastercard", ["51", "53", "55", "2221", "2720"], [16], None),
         ("amex", ["34", "37"], [15], (4, 6, 5)), ("discover", ["6011", "644", "65", "622126"], [16], None),
         ("jcb", ["3528", "3589"], [16], None), ("jcb15", ["1800", "2131"], [15], (4, 6, 5)),
         ("diners", ["300", "305", "36", "38"], [14], (4, 6, 4)), ("unionpay", ["62"], [16, 19], None),
         ("maestro", ["5018", "5020", "5038", "6304", "6759", "6761"], [12, 13, 16, 19], None),
         ("mir", ["2200", "2204"], [16], None), ("rupay", ["508", "60"], [16], None)]
# IBAN: (country, total length, BBAN layout: n = digit, a = upper letter, c = letter or digit)
IBANS = [("DE", "18n"), ("GB", "4a14n"), ("FR", "10n11c2n"), ("NL", "4a10n"), ("ES", "20n"), ("IT", "1a10n12c"),
         ("BE", "12n"), ("AT", "16n"), ("CH", "5n12c"), ("PL", "24n"), ("SE", "20n"), ("DK", "14n"), ("NO", "11n"),
         ("FI", "14n"), ("IE", "4a14n"), ("PT", "21n"), ("GR", "7n16c"), ("CZ", "20n"), ("HU", "24n"), ("RO", "4a16c"),
         ("BG", "4a6n8c"), ("HR", "17n"), ("SI", "15n"), ("SK", "20n"), ("LT", "16n"), ("LV", "4a13c"), ("EE", "16n"),
         ("LU", "3n13c"), ("MT", "4a5n18c"), ("CY", "8n16c"), ("IS", "22n"), ("LI", "5n12c"), ("MC", "10n11c2n"),
         ("TR", "5n1n16c"), ("SA", "2n18c"), ("AE", "3n16n"), ("IL", "19n"), ("QA", "4a21c"), ("KW", "4a22c"),
         ("BH", "4a14c"), ("JO", "4a4n18c"), ("EG", "25n"), ("BR", "23n1a1c"), ("PK", "4a16c"), ("UA", "6n19c"),
         ("KZ", "3n13c"), ("GE", "2a16n"), ("AZ", "4a20c"), ("RS", "18n"), ("BA", "16n"), ("MK", "3n10c2n"),
         ("AL", "8n16c"), ("MD", "2c18c"), ("XK", "16n"), ("TN", "20n"), ("IR", "22n"), ("MR", "23n"), ("MU", "4a19n3a"),
         ("CR", "18n"), ("DO", "4c20n"), ("GT", "4c20c"), ("LB", "4n20c"), ("PS", "4a21c"), ("VG", "4a16n"),
         ("SM", "1a10n12c"), ("AD", "8n12c"), ("FO", "14n"), ("GL", "14n"), ("GI", "4a15c"), ("ME", "18n")]

LOOKALIKES = [
    "Posted 2025-03-11 11:41 by admin.", "Updated 11.03.2025 14:05:33 CET.", "Timestamp 2025-03-11T11:41:00Z.",
    "Meeting on 03/11/2025 at 10:30.", "Logged 20250311 114100 in batch 7.", "Opening hours 09:00-17:30, Mon-Fri.",
    "The 1990-2000 decade and 2001–2010.", "See pp. 1234-1256 of volume 12.", "Seasons 2019 2020 2021 2022.",
    "Upgrade to version 2.8.1.1 now.", "Windows 10.0.19041.1288 and Chrome 118.0.5993.117.",
    "Kernel 5.15.0.1034 boots.", "Build 22621.2428 is out; v3.2.1.4 follows.", "OID 1.3.6.1.4.1.311.21.7 names it.",
    "The arc 2.5.4.3 is commonName.", "urn:oid:2.16.840.1.113883.6.1 is LOINC.", "Price $1,299.99, was $1,499.00.",
    "Only € 2 499,00 incl. VAT.", "Population 1 299 000 in 2020.", "Order #123-4567890-1234567 shipped.",
    "Invoice no. 2019-0042-7781 is due.", "Tracking 1Z999AA10123456784 via UPS.", "ISBN 978-3-16-148410-0.",
    "ISBN-10: 0-306-40615-2, ISBN 9780306406157.", "Located at 40.7128, -74.0060 and 51.5074 -0.1278.",
    "ZIP 90210-1234, postcode 10115.", "Unix time 1699999999 marks it.", "Final score 3-1, attendance 45 321.",
    "Serial SN 4829-1038-5521-77.", "Model RT-AC68U rev 1.0.4.2.", "Patent US 10,123,456 B2.",
    "Lottery numbers 12 24 31 38 45 49.", "DOI 10.1000/182 and PMID 31452104.", "Ref. 2024/11/4417 applies.",
    "Chapter 3.2.1.4 explains it.", "Between 10:30-11:45 and 14:00-15:15.", "Call sign N0CALL on 14.230 MHz.",
    "Version 1.2.3-rc.4 (build 20231105.1).", "ASIN B08N5WRWNW; SKU 4006381333931.", "Reading 2,450,000 units.",
    "Page 1 of 12 · 2025-03-11 08:15 · 1,024 views", "Flight LH 2025 at 11:41 from gate 12.",
    "Account ID 100004321987 is shown.", "EAN 4006381333931 barcode.", "Tel Aviv 2025 marathon, 42.195 km.",
]


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


def luhn_complete(body: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch) * (2 if i % 2 == 0 else 1)
        total += d - 9 if d > 9 else d
    return body + str((10 - total % 10) % 10)


def make_card(rng: random.Random) -> tuple[str, bool]:
    """(printed card number, printed in the network's grouping)."""
    _, prefixes, lengths, grouping = rng.choice(CARDS)
    prefix, length = rng.choice(prefixes), rng.choice(lengths)
    digits = luhn_complete(prefix + _digits(rng, length - len(prefix) - 1))
    style = rng.random()
    if style < 0.25:
        return digits, False
    sep = " " if style < 0.75 else "-"
    sizes = grouping or tuple([4] * (length // 4) + ([length % 4] if length % 4 else []))
    parts, pos = [], 0
    for s in sizes:
        parts.append(digits[pos:pos + s])
        pos += s
    return sep.join(parts), True


def make_iban(rng: random.Random) -> str:
    country, layout = rng.choice(IBANS)
    bban, num = "", ""
    for ch in layout:
        if ch.isdigit():
            num += ch
            continue
        pool = {"n": string.digits, "a": string.ascii_uppercase, "c": string.digits + string.ascii_uppercase}[ch]
        bban += "".join(rng.choice(pool) for _ in range(int(num)))
        num = ""
    check = 98 - int("".join(str(int(c, 36)) for c in bban + country + "00")) % 97
    iban = f"{country}{check:02d}{bban}"
    style = rng.random()
    if style < 0.5:
        iban = " ".join(iban[i:i + 4] for i in range(0, len(iban), 4))
    return iban.lower() if rng.random() < 0.2 else iban


def make_email(rng: random.Random) -> str:
    first, last = rng.choice(NAMES).lower().split()
    user = rng.choice([f"{first}.{last}", f"{first[0]}{last}", f"{first}_{last}{rng.randint(1, 99)}",
                       f"{first}+news", f"{last}.{first}", f"{first.upper()}.{last.capitalize()}"])
    domain = rng.choice(["gmail.com", "yahoo.co.jp", "mail.ru", "uni-heidelberg.de", "dept.cs.ox.ac.uk", "qq.com",
                         "outlook.fr", "company.io", "stadt-graz.at", "correo.gob.mx", "web.de", "proton.me"])
    return f"{user}@{domain}"


def make_ip(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.7:
        first = rng.choice([10, 172, 192, 203, 45, 89, 185, 8, 66, 151])
        return ".".join(str(x) for x in [first, rng.randint(0, 255), rng.randint(0, 255), rng.randint(1, 254)])
    groups = [f"{rng.randint(0, 0xFFFF):x}" for _ in range(8)]
    if r < 0.8:
        return ":".join(groups)
    if r < 0.9:
        return f"2001:db8::{groups[0]}:{groups[1]}"
    return f"fe80::{groups[2]}:{groups[3]}:{groups[4]}:{groups[5]}"


def make_ssn(rng: random.Random) -> str:
    area = rng.choice([a for a in range(1, 900) if a != 666])
    sep = rng.choice(["-", "-", "-", " "])
    return f"{area:03d}{sep}{rng.randint(1, 99):02d}{sep}{rng.randint(1, 9999):04d}"


def phone_variants(rng: random.Random) -> list[tuple[str, str]]:
    """(region, written number) for every region and number type, in several formats."""
    PNF, out = phonenumbers.PhoneNumberFormat, []
    types = [phonenumbers.PhoneNumberType.FIXED_LINE, phonenumbers.PhoneNumberType.MOBILE,
             phonenumbers.PhoneNumberType.TOLL_FREE]
    for region in sorted(phonenumbers.SUPPORTED_REGIONS):
        for kind in types:
            example = phonenumbers.example_number_for_type(region, kind)
            if example is None:
                continue
            number = example
            for _ in range(20):  # another valid number of the same shape
                national = str(example.national_number)
                k = min(3, len(national) - 2)
                candidate = phonenumbers.parse(f"+{example.country_code}{national[:-k]}{_digits(rng, k)}", None)
                if phonenumbers.is_valid_number(candidate):
                    number = candidate
                    break
            intl = phonenumbers.format_number(number, PNF.INTERNATIONAL)
            nat = phonenumbers.format_number(number, PNF.NATIONAL)
            forms = [intl, phonenumbers.format_number(number, PNF.E164), nat, intl.replace(" ", "-"),
                     "00" + intl[1:], nat.replace(" ", "."), nat.replace(" ", "-"),
                     "".join(c for c in nat if c.isdigit() or c == "+")]
            if nat.startswith("0") and " " in intl:
                cc, rest = intl.split(" ", 1)
                forms.append(f"{cc} (0){rest}")
            for form in rng.sample(forms, 3):
                if rng.random() < 0.08:
                    form += rng.choice([" ext. 214", " x4587", " ext 12"])
                out.append((region, form))
    return out


def _sentence(rng, templates, value):
    t = rng.choice(templates)
    text = t.format(v="\x00", name=rng.choice(NAMES), city=rng.choice(CITIES), dom="shop.co")
    return text.replace("\x00", value), text.index("\x00")


def build_formats(seed: int = 0, per_doc: int = 6) -> list[tuple[str, list[tuple[int, int, str]]]]:
    """Documents of sentences, each with the (start, end, category) of its planted values."""
    rng = random.Random(seed)
    values = [("phone", v, PHONE_CUED if rng.random() < 0.75 else PHONE_UNCUED) for _, v in phone_variants(rng)]
    for _ in range(400):
        card, _grouped = make_card(rng)
        values.append(("card", card, CARD_CUED if rng.random() < 0.7 else CARD_UNCUED))
    values += [("iban", make_iban(rng), IBAN_TEMPLATES) for _ in range(400)]
    values += [("email", make_email(rng), EMAIL_TEMPLATES) for _ in range(400)]
    values += [("ip", make_ip(rng), IP_TEMPLATES) for _ in range(400)]
    for _ in range(300):  # a spaced SSN is only an SSN when the text says so
        ssn = make_ssn(rng)
        values.append(("ssn", ssn, SSN_TEMPLATES if "-" in ssn else SSN_TEMPLATES[:4]))
    rng.shuffle(values)
    docs = []
    for i in range(0, len(values), per_doc):
        text, spans = "", []
        for category, value, templates in values[i:i + per_doc]:
            sentence, at = _sentence(rng, templates, value)
            spans.append((len(text) + at, len(text) + at + len(value), category))
            text += sentence + (" " if sentence[-1] in ".!?。)" else "\n")
        docs.append((text.strip(), spans))
    return docs


FAKER_LOCALES = ["en_US", "en_GB", "de_DE", "fr_FR", "it_IT", "es_ES", "pt_BR", "ja_JP", "zh_CN", "ko_KR", "ru_RU",
                 "nl_NL", "pl_PL", "sv_SE", "tr_TR", "en_IN", "en_AU", "es_MX", "ar_EG", "hi_IN", "id_ID", "vi_VN",
                 "th_TH", "uk_UA", "cs_CZ", "da_DK", "fi_FI", "no_NO", "he_IL", "en_CA", "fr_CH", "de_AT", "pt_PT",
                 "el_GR", "hu_HU", "ro_RO", "fa_IR", "zh_TW"]


IBAN_LENGTH = {c: 4 + sum(int(n) for n in re.findall(r"\d+", layout)) for c, layout in IBANS}


def _iban_valid(iban: str) -> bool:
    """Check digits hold and the length is the registry's (for the countries of IBANS)."""
    s = iban.replace(" ", "").upper()
    if IBAN_LENGTH.get(s[:2]) != len(s):  # countries outside the registry (Faker makes TH ones) are not IBANs
        return False
    return len(s) > 4 and int("".join(str(int(c, 36)) for c in s[4:] + s[:4])) % 97 == 1


def build_faker(seed: int = 0, per_doc: int = 6, per_locale: int = 25):
    """The second development set: values from Faker's locale providers (its own formats and
    networks), in the same kinds of sentences; IBANs only where the check digits hold."""
    from faker import Faker

    rng = random.Random(seed + 2)
    values = []
    for loc in FAKER_LOCALES:
        fake = Faker(loc)
        fake.seed_instance(seed)
        for _ in range(per_locale):
            values.append(("phone", fake.phone_number(), PHONE_CUED if rng.random() < 0.75 else PHONE_UNCUED))
            values.append(("card", fake.credit_card_number(), CARD_CUED if rng.random() < 0.7 else CARD_UNCUED))
            values.append(("email", fake.email(), EMAIL_TEMPLATES))
            values.append(("ip", fake.ipv4() if rng.random() < 0.7 else fake.ipv6(), IP_TEMPLATES))
            iban = fake.iban()
            if _iban_valid(iban):
                values.append(("iban", iban, IBAN_TEMPLATES))
            if loc == "en_US":
                values.append(("ssn", fake.ssn(), SSN_TEMPLATES))
    rng.shuffle(values)
    docs = []
    for i in range(0, len(values), per_doc):
        text, spans = "", []
        for category, value, templates in values[i:i + per_doc]:
            sentence, at = _sentence(rng, templates, value)
            spans.append((len(text) + at, len(text) + at + len(value), category))
            text += sentence + (" " if sentence[-1] in ".!?。)" else "\n")
        docs.append((text.strip(), spans))
    return docs


def build_lookalikes(seed: int = 0, per_doc: int = 5) -> list[str]:
    rng = random.Random(seed + 1)
    items = LOOKALIKES * 4
    rng.shuffle(items)
    return [" ".join(items[i:i + per_doc]) for i in range(0, len(items), per_doc)]
