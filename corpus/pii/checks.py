"""Check digits and issuer tables: Luhn + IIN ranges for payment cards, ISO 13616 lengths and
mod-97 for IBANs, SSA allocation rules for US social security numbers.

Each check takes the digits (or characters) of a candidate without separators.
"""

from __future__ import annotations

# Payment card networks: (network, IIN prefix ranges as (low, high) on the first len(low) digits,
# allowed lengths). From the networks' published IIN tables (ISO/IEC 7812 registry summaries).
CARD_NETWORKS: tuple[tuple[str, tuple[tuple[str, str], ...], tuple[int, ...]], ...] = (
    ("visa", (("4", "4"),), (13, 16, 19)),
    ("mastercard", (("51", "55"), ("2221", "2720")), (16,)),
    ("amex", (("34", "34"), ("37", "37")), (15,)),
    ("discover", (("6011", "6011"), ("644", "649"), ("65", "65"), ("622126", "622925")), (16, 17, 18, 19)),
    ("jcb", (("3528", "3589"), ("35", "35")), (16, 17, 18, 19)),  # 35xx outside 3528-3589: RuPay/JCB co-brands
    ("jcb15", (("1800", "1800"), ("2131", "2131")), (15,)),
    ("diners", (("300", "305"), ("3095", "3095"), ("36", "36"), ("38", "39")), (14, 15, 16, 17, 18, 19)),
    ("unionpay", (("62", "62"), ("81", "81")), (16, 17, 18, 19)),
    ("maestro", (("50", "50"), ("56", "69")), (12, 13, 14, 15, 16, 17, 18, 19)),
    ("mir", (("2200", "2204"),), (16, 17, 18, 19)),
    ("rupay", (("60", "60"), ("82", "82"), ("508", "508")), (16,)),
    ("prostir", (("9", "9"),), (16,)),  # Ukraine's national network
)


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


def card_network(digits: str) -> str | None:
    """The network whose IIN range and length fit `digits` and whose Luhn check passes, else None."""
    if not 12 <= len(digits) <= 19 or not digits.isdigit() or len(set(digits)) == 1 or not luhn_ok(digits):
        return None
    for network, ranges, lengths in CARD_NETWORKS:
        if len(digits) not in lengths:
            continue
        for low, high in ranges:
            if low <= digits[:len(low)] <= high:
                return network
    return None


def card_ok(candidate: str) -> bool:
    return card_network("".join(c for c in candidate if c.isdigit())) is not None


def ssn_ok(area: str, group: str, serial: str) -> bool:
    """SSA rules: no area 000, 666 or 9xx; no group 00; no serial 0000."""
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


# IBAN length per country (ISO 13616 IBAN registry).
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21,
    "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28,
    "NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22,
    "RU": 33, "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25,
    "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
    # in national use with IBAN structure (SWIFT's IBAN Plus, experimental countries)
    "AO": 25, "BF": 28, "BJ": 28, "CF": 27, "CG": 27, "CI": 28, "CM": 27, "CV": 25, "DZ": 26, "GA": 27,
    "GQ": 27, "GW": 25, "HT": 28, "IR": 26, "KM": 27, "MA": 28, "MG": 27, "ML": 28, "MZ": 25, "NE": 28,
    "SN": 28, "TD": 27, "TG": 28,
}


def iban_ok(candidate: str) -> bool:
    iban = "".join(candidate.split()).replace("-", "").upper()
    if IBAN_LENGTHS.get(iban[:2]) != len(iban) or not iban[2:4].isdigit() or not iban.isalnum():
        return False
    rearranged = iban[4:] + iban[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1
