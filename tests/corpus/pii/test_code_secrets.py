"""Secrets in code (corpus/pii/secrets.py) and the `code_secrets_v3` stage: real source files with
credentials placed where code keeps them, placeholders that must stay, exact redactions and reasons."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from corpus.pii import find_secrets
from corpus.registry import stage_class

REPOS = Path(__file__).resolve().parents[3] / "data" / "samples" / "code" / "repos"
KEY_BLOCK = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(
    ["MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"] * 6) + "\n-----END RSA PRIVATE KEY-----"


def _kinds(text: str) -> list[tuple[str, str]]:
    spans, _ = find_secrets(text)
    return [(s.kind, text[s.start:s.end]) for s in spans]


def test_provider_keys_assignments_and_blocks_in_a_real_file():
    carrier = (REPOS / "pallets__click" / "src/click/_utils.py").read_text()
    planted = (
        'DB_PASSWORD = "Summer2024!x"\n'
        'client = Client(api_key="9f86d081884c7d659a2feaa0c55ad015", region="eu")\n'
        'os.environ.setdefault("GITHUB_TOKEN", "ghp_' + "aB3" * 12 + '")\n'
        f'SIGNING_KEY = """{KEY_BLOCK}"""\n'
        'DATABASE_URL = "postgres://app:Pa55-w0rd@db.prod.internal:5432/app"\n'
        '__maintainer__ = "Ana Lima <ana.lima@dataworks.io>"\n'
    )
    assert _kinds(carrier) == []  # the real file holds no credentials
    text = carrier + "\n" + planted
    assert _kinds(text) == [("password", "Summer2024!x"), ("generic_secret", "9f86d081884c7d659a2feaa0c55ad015"),
                            ("github_token", "ghp_" + "aB3" * 12), ("private_key", KEY_BLOCK),
                            ("url_credentials", "Pa55-w0rd"), ("email", "ana.lima@dataworks.io")]


# Issue 39's credential families, written the way real repositories hold them (values made up here).
FAMILIES = {
    "password in a config": ("database:\n  host: db.internal\n  password: Xk9#mQ2vLp\n", "Xk9#mQ2vLp"),
    "password in a .env file": ("MYSQL_ROOT_PASSWORD=t7Hq2mZx9c\n", "t7Hq2mZx9c"),
    "password in a test fixture": ("    session = UserSession.create(login: 'ben', password: 'zq8rTm2w')\n", "zq8rTm2w"),
    "basic-auth header": ('headers = {"Authorization": "Basic dXNlcjpTM2NyZXRQYXNzMjAyNA=="}\n',
                          "dXNlcjpTM2NyZXRQYXNzMjAyNA=="),
    "nonce": ('{"appid":"x","nonce_str":"Ot5KWzH1IukRKCWq","sign":"x"}\n', "Ot5KWzH1IukRKCWq"),
    "OTP secret": ("const otpSecret = 'JBSWY3DPEHPK3PXP4QFKZ7YB';\n", "JBSWY3DPEHPK3PXP4QFKZ7YB"),
    "app secret (Go)": ('\topts.CookieSecret = "rmibqwyykbmhwgmduzwjonvhtakijctc"\n', "rmibqwyykbmhwgmduzwjonvhtakijctc"),
    "key (C#)": ('        string clientSecret = "B9EA1E78AAA3A2D72DC4F1";\n', "B9EA1E78AAA3A2D72DC4F1"),
    "key (Java)": ('    private static final String API_KEY = "f3a9c2e17b5d4e6a8c0b9d2e4f6a8b1c";\n',
                   "f3a9c2e17b5d4e6a8c0b9d2e4f6a8b1c"),
    "key (PHP)": ("    $client = new Mailgun('key-2f5a9c1e7b3d4a6c8e0f2b4d6a8c0e1f');\n", "key-2f5a9c1e7b3d4a6c8e0f2b4d6a8c0e1f"),
    "URL password": ('DB="sqlserver://sa:Xbx3cZ9w@localhost/"\n', "Xbx3cZ9w"),
    "NATS nkey seed": ("# SUAMK2FG4MI6UE3ACF3FK3OIQBCEIEZV7NSWFFEW63UXMRLFM2XLAXK4GY\n",
                       "SUAMK2FG4MI6UE3ACF3FK3OIQBCEIEZV7NSWFFEW63UXMRLFM2XLAXK4GY"),
}


def test_each_credential_family_is_found_exactly():
    for family, (line, value) in FAMILIES.items():
        spans, _ = find_secrets(line)
        assert [line[s.start:s.end] for s in spans] == [value], family


def test_non_credentials_next_to_credential_words_are_left():
    lines = ['  "LABEL_PASSWORD": "Contraseña",\n', "password = os.environ['DB_PASSWORD']\n",
             '  "INVALID_PASSWORD_LENGTH": "Password must be {{length}} characters.",\n',
             "    key = getKeyObject(key)\n", '<color key="textColor" name="labelColor"/>\n',
             'token_type = "bearer"\n', "password: ${DB_PASSWORD}\n", 'secret = "changeme"\n']
    for line in lines:
        assert find_secrets(line)[0] == [], line


def test_placeholders_labels_and_test_addresses_are_left_and_counted():
    text = ('password = "changeme"\napi_key = "<your-api-key>"\ntoken = "${GITHUB_TOKEN}"\nSECRET_KEY = "xxx"\n'
            '"password": "Passwort",\nAWS_ACCESS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"\n'
            'CHECKSUM = "d41d8cd98f00b204e9800998ecf8427e"\npassword = os.environ["DB_PASSWORD"]\n'
            'contact = "dev@example.com"  # or admin@localhost\n'
            '"password": "Passwort:",\nPIN_PASSWORD = "123456"\nsupport = "you@yourdomain.com"\n')
    spans, skipped = find_secrets(text)
    assert spans == []
    assert skipped["email_skipped_test_address"] == 2 and skipped["secret_skipped_placeholder"] >= 6
    assert skipped["secret_skipped_label"] >= 2  # "Passwort", "Passwort:"


def test_stage_redacts_keeping_syntax_or_drops_with_reason():
    settings = (REPOS / "demo__mixed-quality" / "app/settings.py").read_text()
    table = pa.table({"text": [settings, "x = 1\n", "key = 'ghp_" + "a1B" * 12 + "'\n"]})
    out = stage_class("code_secrets_v3")({})(table)
    red = out.table.column("text")[0].as_py()
    # the documented AWS example keys and jane.doe@example.com are placeholders; the URL password is real
    assert 'AWS_ACCESS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"' in red and "jane.doe@example.com" in red
    assert "postgres://admin:<PASSWORD>@db.internal" in red
    assert out.table.column("code__n_secrets").to_pylist() == [1, 0, 1]
    assert out.table.column("code__secret_kinds").to_pylist() == ["url_credentials", None, "github_token"]
    assert out.stats.counters["secret_skipped_placeholder"] == 3  # two AWS example keys, a "your-..." value
    assert out.stats.counters["email_skipped_test_address"] == 1
    ev = json.loads(out.table.column("code__secret_evidence")[2].as_py())
    assert ev == [{"start": 7, "end": 47, "kind": "github_token", "evidence": "rule:github_token"}]
    dropped = stage_class("code_secrets_v3")({"action": "drop"})(table)
    assert dropped.rejects.column("drop_reason").to_pylist() == ["secret:url_credentials", "secret:github_token"]
    detail = [json.loads(d) for d in dropped.rejects.column("drop_detail").to_pylist()]
    assert [(settings[d["start"]:d["end"]], d["evidence"]) for d in detail[0]] == [
        ("hunter2secret", "rule:url_credentials")]  # the evidence says where and which rule, not the value itself
    assert "hunter2secret" not in dropped.rejects.column("drop_detail")[0].as_py()


def test_a_credential_at_the_end_of_a_long_minified_line_is_found():
    """Lines over 4,000 characters are read in windows around credential words; thousands of windows
    (random strings hold 'key', 'otp', 'pin' by chance) must not hide the last one."""
    import random
    import string

    rng = random.Random(0)
    items = ",".join(f'k{i}:"{"".join(rng.choice(string.ascii_letters) for _ in range(12))}"' for i in range(20000))
    line = "var a={" + items + ',apiKey:"Xk9mQ2vLp7Hq2mZx9cT4"}'
    spans, _ = find_secrets(line, ext=".js")
    assert [line[s.start:s.end] for s in spans] == ["Xk9mQ2vLp7Hq2mZx9cT4"]
