"""Personal data and secrets: one detector family for every corpus.

- text.py: emails, phones (phones.py), IPs, payment cards, US SSNs, IBANs in prose; used by
  `pii_v3` (web, math, licensed data).
- secrets.py: credentials in source code plus the same email rule; used by `code_secrets_v3`.
- checks.py: Luhn + IIN table, IBAN lengths and mod-97, SSN rules.
"""

from .checks import card_network, card_ok, iban_ok, luhn_ok, ssn_ok
from .secrets import KINDS as SECRET_KINDS
from .secrets import SecretSpan, find_secrets, redact_secrets
from .text import CATEGORIES, PLACEHOLDERS, Span, find_pii, is_test_email, redact

__all__ = ["CATEGORIES", "PLACEHOLDERS", "SECRET_KINDS", "SecretSpan", "Span", "card_network", "card_ok",
           "find_pii", "find_secrets", "iban_ok", "is_test_email", "luhn_ok", "redact", "redact_secrets", "ssn_ok"]
