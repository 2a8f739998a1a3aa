"""Language id, PII detection and redaction: exact rows and reasons (safety: test_safety.py)."""

from __future__ import annotations

from corpus.registry import stage_class
from corpus.web.pii import card_ok, find_pii, iban_ok, luhn_ok

from .conftest import c4_texts, table_of


def test_language_id_and_filter_reasons():
    texts = [c4_texts()[0], "Dies ist ein ganz normaler deutscher Satz über das Wetter in Berlin.", "", None]
    scored = stage_class("web_lang_v1")({})(table_of(texts))
    langs = scored.table.column("lang").to_pylist()
    assert langs[:2] == ["en", "de"] and langs[2:] == [None, None]
    assert scored.table.column("lang_score").to_pylist()[0] > 0.65
    result = stage_class("lang_filter_v1")({"languages": ["en"]})(scored.table)
    assert result.table.column("id").to_pylist() == ["d0"]
    assert result.rejects.column("drop_reason").to_pylist() == ["wrong_language"] * 3


def test_pii_checksums():
    assert luhn_ok("4111111111111111") and not luhn_ok("4111111111111112")
    assert card_ok("5500 0000 0000 0004") and not card_ok("1234 5678 9012 3456")
    assert iban_ok("DE89 3704 0044 0532 0130 00") and not iban_ok("DE89 3704 0044 0532 0130 01")


def test_pii_redacts_and_drops_per_category_with_counters():
    base = c4_texts()[4]
    texts = [base + " Write to jane.roe@mail.example.org or call (415) 555-2671 from 203.0.113.9.",
             base + " Pay with 4242 4242 4242 4242 today.",
             base + " Invoice 2019-05-05, order 12345, version 1.2.3, price $1,299.",
             base + " My SSN is 078-05-1120 and IBAN GB82 WEST 1234 5698 7654 32."]
    stage = stage_class("web_pii_v1")({"actions": {"email": "redact", "phone": "redact", "ip": "redact",
                                                   "card": "drop", "ssn": "redact", "iban": "count"}})
    result = stage(table_of(texts))
    assert result.table.column("id").to_pylist() == ["d0", "d2", "d3"]
    assert result.rejects.column("drop_reason").to_pylist() == ["pii_card"]
    out = result.table.column("text").to_pylist()
    assert out[0].endswith("Write to <EMAIL> or call <PHONE> from <IP_ADDRESS>.")
    assert out[1] == texts[2]  # dates, order numbers, versions and prices are not PII
    assert "<US_SSN>" in out[2] and "GB82 WEST" in out[2]
    counters = result.stats.counters
    assert {k: counters[k] for k in ("pii_email", "pii_phone", "pii_ip", "pii_card", "pii_ssn", "pii_iban")} == \
        {"pii_email": 1, "pii_phone": 1, "pii_ip": 1, "pii_card": 1, "pii_ssn": 1, "pii_iban": 1}


def test_pii_finds_ipv6_and_international_phones():
    spans = find_pii("Server 2001:db8:85a3::8a2e:370:7334 or ring +44 20 7946 0958 now")
    assert [s.category for s in spans] == ["ip", "phone"]
