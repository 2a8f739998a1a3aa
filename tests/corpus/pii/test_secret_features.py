"""The credential model's features (corpus/pii/secret_features.py) and the fast scans of the candidate
finder (corpus/pii/secret_candidates.py): exact features for each new signal, and the rewritten
patterns checked against plain reference patterns written the slow, obvious way."""

from __future__ import annotations

import re

from corpus.pii import secret_candidates as SC
from corpus.pii.secret_candidates import candidates
from corpus.pii.secret_features import features, line_features, value_shape


def _feats(line: str, value: str, ext: str = ".py") -> list[str]:
    """Features of the candidate whose value is `value` in a one-line text."""
    cands = [c for c in candidates(line) if c.value(line) == value]
    assert len(cands) == 1, [c.value(line) for c in candidates(line)]
    return features(cands[0], line, line_features(line), ext, 1)


def test_value_shapes_of_hashes_public_keys_guids_and_typed_repeats():
    assert "dollar_fields" in value_shape("$6$rounds=5000$aFr56HjK3DrB8t3S$zhPQiS85cgBlNhUKKE6n")
    assert "dollar_fields" not in value_shape("pa$$word")  # one run of dollars is a password's style
    assert "periodic" in value_shape("deadbeef" * 5)
    assert "periodic" not in value_shape("deadbeefdeadbeefdeadbeefdeadbeee")
    assert "der_public" in value_shape("MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAt5egD1BQCK5fCQXKsgWh")
    assert "der_public" not in value_shape("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC")  # PKCS#8 private
    upper = value_shape("CB927D12-4FF7-4A9E-A169-56E4B8A75598")
    lower = value_shape("cb927d12-4ff7-4a9e-a169-56e4b8a75598")
    assert "shape=uuid" in upper and "shape=uuid_upper" in upper
    assert "shape=uuid" in lower and "shape=uuid_upper" not in lower


def test_derived_names_short_names_tags_and_glued_fragments():
    f = _feats('alipay_public_key = "MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQCi"', "MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQCi")
    assert "derived" in f and "derived&key" in f and "der_public" in f
    f = _feats('db_password = "Xk9#mQ2vLp"', "Xk9#mQ2vLp")
    assert not {"derived", "short_name", "in_tag", "glued"} & set(f)
    assert "in_tag" in _feats('<add key="guardian" value="true" />', "guardian", ".config")
    line = 'password: "$argon2id$v=19$m=65536,t=3,p=2$c2FsdHNhbHRzYWx0$E8QI4jHbUBt3EdsU1NFDu4Bq5jObKNx7nBKSn1EYQxk"'
    assert "glued" in _feats(line, "E8QI4jHbUBt3EdsU1NFDu4Bq5jObKNx7nBKSn1EYQxk", ".yml")  # cut out after a '$'
    f = _feats(line, "2$c2FsdHNhbHRzYWx0$E8QI4jHbUBt3EdsU1NFDu4Bq5jObKNx7nBKSn1EYQxk", ".yml")
    assert "short_name" in f and "dollar_fields" in f  # `p=2$...` inside the hash string


def test_line_flags_are_crossed_with_the_name_class():
    f = _feats('    assertEquals("x", oauth_nonce="vLu2Kos75g973jCqidnP8SSELnueAQXL")', "vLu2Kos75g973jCqidnP8SSELnueAQXL",
               ".java")
    assert "code_word" in f and "code_word&secret" in f


# The candidate finder's scans were rewritten for speed; these are the plain forms they replace.
_CUE_REFERENCE = re.compile(
    r"pass|pwd|secret|token|key|auth(?!or)|nonce|salt|otp|seed|cred|session|cookie|login|signature|hmac|"
    r"bearer|basic |private.?key|cipher|crypt|identified by|://[^\s/:@]{0,64}:[^\s/@]{1,128}@|appid|app_id|"
    r"client_?id|-u |--user|\bpw\b|_pw\b|\bpin\b|\bapi")
_BARE_REFERENCE = re.compile(r"(?P<name>[A-Za-z_$@][\w.\-$@\[\]]{0,80})(?P<nq>[\"']?)[ \t]*(?P<op>:=|=>|=|:)[ \t]*"
                             r"(?P<val>[^\s\"'`,;&<>(){}\[\]|]{1,600})")
LINES = [
    "db_password = 'x'", "the author wrote", "AUTHOR: me", "pw = 1", "my_pw: 2", "pwned", "spin the pin 1234",
    "apiary", "rapid", "x://u:p@h", "x://u@h", "curl -u a:b", "--user=a", "identified  by", "identified by 'x'",
    "crypto", "Cookie: a=b", "clientid", "client-id", "app_id", "appid", "keyboard", "monkey", "nothing here",
    "Salt = 'x'", "OTP", "Seed", "CRED", "Session", "login", "Signature", "HMAC", "Bearer abc", "basic auth",
    "basicauth", "private-key", "cipher", "nonce", "token", "secretary", "passport", "pwd",
    "export GITROB_ACCESS_TOKEN=deadbeef", "1abc=value", "--password=hunter2x", "a.b-c[0]=v w=x", "x :=  y",
    'PASS="x"', "k => v, k2: v2", "$db_pass = 'x';", "@api_key: abc", "obj.prop.deep=1;next=2",
]


def test_line_cue_selects_the_same_lines_as_the_plain_alternation():
    for line in LINES:
        assert bool(SC._LINE_CUE.search(line.lower())) == bool(_CUE_REFERENCE.search(line.lower())), line


def test_bound_value_scan_matches_the_backtracking_form():
    for line in LINES:
        got = [(m.span("name"), m.span("val"), m.group("op")) for m in SC._BARE.finditer(line)]
        want = [(m.span("name"), m.span("val"), m.group("op")) for m in _BARE_REFERENCE.finditer(line)]
        assert got == want, line


def test_url_credentials_searched_around_each_scheme_separator_find_what_a_full_scan_finds():
    from corpus.pii import secrets as S

    pattern = dict((k, p) for k, p, _, _ in S.PROVIDER_PATTERNS)["url_credentials"]
    texts = ["postgres://app:Pa55-w0rd@db:5432/x and redis://:s3cretX@cache:6379/0",
             "http://u:p@hxyz://u:pass1@h", "a" * 30 + "://u:pass1@h", "x://u:pass1@h" * 3,
             "mongodb+srv://admin:" + "k" * 128 + "@c.example.net", "no scheme here ://u:pass1@h",
             "ftp://anonymous:guest@ftp.example.org/ :// ://x:y@ https://deploy:tok3n@git.corp.io"]
    for text in texts:
        assert [m.span(1) for m in S._url_matches(pattern, text)] == [m.span(1) for m in pattern.finditer(text)], text
