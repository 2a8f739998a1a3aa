"""PII in text (corpus/pii/text.py, phones.py, checks.py) and the `pii_v3` stage: exact spans,
rows, drop reasons and counters on real C4 text with values placed in it."""

from __future__ import annotations

import json

import phonenumbers
import pyarrow as pa
import pytest

from corpus.pii import card_network, card_ok, find_pii, iban_ok, luhn_ok
from corpus.registry import stage_class


def _found(text: str) -> list[tuple[str, str]]:
    return [(s.category, text[s.start:s.end]) for s in find_pii(text)]


def test_checksums_and_card_networks():
    assert luhn_ok("4111111111111111") and not luhn_ok("4111111111111112")
    assert card_ok("5500 0000 0000 0004") and not card_ok("1234 5678 9012 3456")
    # published test numbers of each network (the networks' and processors' documentation)
    assert card_network("378282246310005") == "amex"
    assert card_network("3530111333300000") == "jcb"
    assert card_network("6011111111111117") == "discover"
    assert card_network("30569309025904") == "diners"
    assert card_network("6759649826438453") == "maestro"
    assert card_network("180000000000002") == "jcb15"  # 15-digit JCB, prefix 1800
    assert card_network("213100000000001") == "jcb15"
    assert card_network("501800000009") == "maestro"  # 12-digit Maestro
    assert iban_ok("DE89 3704 0044 0532 0130 00") and not iban_ok("DE89 3704 0044 0532 0130 01")
    assert iban_ok("gb82 west 1234 5698 7654 32")  # any letter case


@pytest.mark.parametrize("region", ["US", "GB", "DE", "FR", "JP", "BR", "IN", "AU", "RU", "CN", "ZA", "MX"])
def test_libphonenumber_example_numbers_in_every_format(region):
    """Numbers formatted by libphonenumber itself (the reference) are found whole: international
    formats without help, national ones after a phone word."""
    number = phonenumbers.example_number_for_type(region, phonenumbers.PhoneNumberType.MOBILE)
    intl = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.INTERNATIONAL)
    e164 = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    national = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.NATIONAL)
    for value, lead in ((intl, "Write to Ana at "), (e164, "Ana: "), (national, "Tel.: "), (national, "电话")):
        text = f"{lead}{value}, from 9 to 5."
        assert _found(text) == [("phone", value)], (region, value)


def test_phones_need_structure_or_a_cue_and_never_dates_times_versions():
    text = ("Give Service Experts a call at 18008608747 or (415) 555-2671 x4587. "
            "Our Hamburg shop: 040 3570 2680. Mobile 2345 6789. 联系电话13812345678。")
    assert _found(text) == [("phone", "18008608747"), ("phone", "(415) 555-2671 x4587"),
                            ("phone", "040 3570 2680"), ("phone", "2345 6789"), ("phone", "13812345678")]
    negatives = ("Posted 2025-03-11 11:41 by admin; updated 11.03.2025 14:05. Release 10.0.19041.1288, "
                 "version 2.8.1.1, OID 1.3.6.1.4.1.311. ISBN 978-0-306-40615-7, order #1234-5678-90, "
                 "pages 1234-1256, 1990-2000, 2019 2020 2021, price $1,299.00, 1 299 000 visitors, "
                 "match 10:30-11:45, zip 90210-1234, a run of 2345 6789 without a phone word.")
    assert _found(negatives) == []


def _phones_with_rules(text: str) -> list[tuple[str, str]]:
    return [(text[s.start:s.end], s.rule) for s in find_pii(text) if s.category == "phone"]


def test_national_numbers_with_a_cue_beside_them():
    """Issue 39's families: a label, phrase or possessive right before a national number of any
    length, or a line type right after it; each value and the rule that found it, exactly."""
    cases = [
        ("Phone: 467 3395", "467 3395", "phone:cue_beside"),
        ("Phone: 51 516 33 75", "51 516 33 75", "phone:cue_beside"),
        ("They're not answering at 78 651 450, try later.", "78 651 450", "phone:cue_beside"),
        ("Please update my registered 668 5702 in the file.", "668 5702", "phone:cue_beside"),
        ("Desk: 5403926876", "5403926876", "phone:cue_beside"),
        ("Rua Augusta 12, 30971 21 253 109 8211-Office", "21 253 109 8211", "phone:cue_after"),
        ("Clinic (85) 5986-8343-Office", "(85) 5986-8343", "national_structure"),
        ("Av. Sol 9, 92151 24 428557-Office", "24 428557", "phone:cue_after"),
        ("Büro: 89 1234 567, Mo-Fr.", "89 1234 567", "phone:cue_beside"),
        ("Llámame al 612 345 678.", "612 345 678", "phone:cue_beside"),
        ("reach me at 0176 2345 6789", "0176 2345 6789", "national_structure"),
        ("Office: 5403926876 (ask for Ana)", "5403926876", "phone:cue_beside"),
    ]
    for text, value, rule in cases:
        assert _phones_with_rules(text) == [(value, rule if rule.startswith("phone:") else f"phone:{rule}")], text


def test_cue_words_do_not_make_phones_of_other_numbers():
    negatives = ["Order no. 1234567 shipped.", "See line 1234567 of the log.", "Posted 2025-03-11 11:41 -Office",
                 "ZIP 92151 24 428557 today", "In 2019 we sold 1234 5678 units.", "Desk: 2019-2020 season",
                 "Office: 09:00-17:30", "my registered 2024-05-01 order", "Phone: version 10.0.19041.1288",
                 "Call me at 10:30 on 12.03.2025.", "Phone: $1,299.00", "Fax: ISBN 978-3-16-148410-0"]
    for text in negatives:
        assert _phones_with_rules(text) == [], text


def test_emails_ips_and_ibans():
    text = ("Mail li.wei+news@mail.example.co.uk or 王先生wang@qq.com。 Login from 203.0.113.9 and "
            "2001:db8:85a3::8a2e:370:7334; icon@2x.png is an image. IBAN: fr14 2004 1010 0505 0001 3m02 606 for rent.")
    assert _found(text) == [("email", "li.wei+news@mail.example.co.uk"), ("email", "wang@qq.com"),
                            ("ip", "203.0.113.9"), ("ip", "2001:db8:85a3::8a2e:370:7334"),
                            ("iban", "fr14 2004 1010 0505 0001 3m02 606")]
    assert _found("Upgrade to 2.8.1.1 today; the DNS server is at 8.8.8.8.") == [("ip", "8.8.8.8")]


def test_stage_redacts_drops_on_strong_evidence_only_and_counts(c4_docs):
    base = c4_docs[4]["text"]
    texts = [base + " Write to jane.roe@mail.example.org or call (415) 555-2671 from 203.0.113.9.",
             base + " Pay with Visa 4242 4242 4242 4242 today.",
             base + " Invoice 2019-05-05, order 12345, version 1.2.3, price $1,299.",
             base + " My SSN is 219-09-9999 and IBAN GB82 WEST 1234 5698 7654 32.",
             base + " Licence 49298150 49176408 and Suite 680 36 4022, room 078-05-1120."]
    table = pa.table({"id": [f"d{i}" for i in range(5)], "text": texts})
    stage = stage_class("pii_v3")({"actions": {"email": "redact", "phone": "redact", "ip": "redact",
                                               "card": "drop", "ssn": "drop", "iban": "count"}})
    result = stage(table)
    assert result.table.column("id").to_pylist() == ["d0", "d2", "d4"]
    assert result.rejects.column("drop_reason").to_pylist() == ["pii_card", "pii_ssn"]
    out = result.table.column("text").to_pylist()
    assert out[0].endswith("Write to <EMAIL> or call <PHONE> from <IP_ADDRESS>.")
    assert out[1] == texts[2]  # dates, order numbers, versions and prices are not PII
    # a Luhn-valid number without card words or card grouping, and a dashed SSN without an SSN
    # word, are redacted instead of dropping the document; "680 36 4022" is not an SSN at all
    assert out[2].endswith("Licence <CARD_NUMBER> and Suite 680 36 4022, room <US_SSN>.")
    c = result.stats.counters
    assert (c["pii_email"], c["pii_phone"], c["pii_ip"], c["pii_card"], c["pii_ssn"], c["pii_iban"]) == (1, 1, 1, 2, 2, 1)
    assert c["pii_card_weak_redacted"] == 1 and c["pii_ssn_weak_redacted"] == 1 and c["pii_email_test_address"] == 1
    # evidence: what was redacted (kept rows) or dropped on (rejects), with the rule, at offsets of the input
    ev = [json.loads(e) if e else None for e in result.table.column("pii__evidence").to_pylist()]
    assert [(texts[0][e["start"]:e["end"]], e["category"], e["rule"], e["action"]) for e in ev[0]] == [
        ("jane.roe@mail.example.org", "email", "email", "redact"), ("(415) 555-2671", "phone",
         "phone:national_structure", "redact"), ("203.0.113.9", "ip", "ip", "redact")]
    assert ev[1] is None
    detail = [json.loads(d) for d in result.rejects.column("drop_detail").to_pylist()]
    assert [(texts[1][e["start"]:e["end"]], e["rule"], e["action"]) for e in detail[0]] == [
        ("4242 4242 4242 4242", "card:luhn+iin+grouping+cue", "drop")]
    assert [(texts[3][e["start"]:e["end"]], e["rule"]) for e in detail[1]] == [("219-09-9999", "ssn:dashed+cue")]


def test_stage_config_errors_name_the_fix():
    with pytest.raises(Exception, match="unknown category 'phones'"):
        stage_class("pii_v3")({"actions": {"phones": "redact"}})
