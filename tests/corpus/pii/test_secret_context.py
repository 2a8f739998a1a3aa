"""Issue 39, fourth round: values the credential detector skips before its model, with their reasons
(corpus/pii/secrets.py `skip_reason`), and the context features of corpus/pii/secret_context.py and
secret_features.py. Each case is written here by hand from what the signal means, not read off the code."""

from __future__ import annotations

from corpus.pii import find_secrets
from corpus.pii.secret_candidates import candidates
from corpus.pii.secret_context import fence_starts, neighbour_flags, values_per_name
from corpus.pii.secret_features import features, line_features, value_shape
from corpus.pii.secrets import skip_reason

PUBLIC_KEY = "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAt5egD1BQCK5fCQXKsgWh"


def _reason(text: str, value: str) -> str | None:
    found = [c for c in candidates(text) if c.value(text) == value]
    assert found, [c.value(text) for c in candidates(text)]
    return skip_reason(found[0], text)


def test_skip_reasons_for_values_that_are_not_the_secret():
    # public, one-way or encrypted by name; a name that also says secret/hmac/private keeps its value
    assert _reason('partner_public_key = "' + PUBLIC_KEY + '"\n', PUBLIC_KEY) == "derived"
    assert _reason("GRAYLOG_SHA256_PASSWORD=b1cb6e31e172577918c9e7806c572b5e\n",
                   "b1cb6e31e172577918c9e7806c572b5e") == "derived"
    assert _reason('"encryptedKey": "e3a56746c0f9109d18b3a2652b76f16d"\n', "e3a56746c0f9109d18b3a2652b76f16d") == "derived"
    assert _reason('HMAC_SHA256_SECRET = "q8Zr2mXk9LtV4wPe"\n', "q8Zr2mXk9LtV4wPe") is None
    # a public key needs no name: its DER header says what it is
    assert _reason("    " + PUBLIC_KEY + "\n", PUBLIC_KEY) == "derived"
    # six to eight digits under token/otp/code: a one-time code; a password of digits stays a password
    assert _reason("    token: '120294',\n", "120294") == "one_time_code"
    assert _reason("  otp = '12029455'\n", "12029455") == "one_time_code"
    assert _reason("    password: '120294',\n", "120294") is None
    assert _reason("    token: '1202941234',\n", "1202941234") is None  # ten digits: not an OTP length
    # password hashes, and a field cut out of one
    assert _reason('password: "$2a$10$3GXzp3J5GhHThGisbpvpZuftbmzPivDMo94XPnkTnDe"\n',
                   "$2a$10$3GXzp3J5GhHThGisbpvpZuftbmzPivDMo94XPnkTnDe") == "password_hash"
    line = 'password: "$argon2id$v=19$m=65536,t=1,p=8$NEwwcVNuQWlQMFpkMndxdg$LlHjiLxPB94pdmOiNwr7Bgy"\n'
    assert _reason(line, "8$NEwwcVNuQWlQMFpkMndxdg$LlHjiLxPB94pdmOiNwr7Bgy") == "password_hash"
    # `scheme: //...` and `host: 8080/path` are URLs read as bindings; a Google refresh token `1//0...` is not
    assert _reason('<a href="https://github.com/authelia"><img src="https://opencollective.com/authelia/c.svg?w=8" /></a>\n',
                   "//opencollective.com/authelia/c.svg?w=8") == "url"
    assert _reason('"raw": "http://localhost:8080/api/v1/topics/produce?key=mykey",\n', "8080/api/v1/topics/produce") == "url"
    assert _reason("refresh_token: 1//01Jb4ie5SVaDACgNGBJCIGWGHJdJ\n", "1//01Jb4ie5SVaDACgNGBJCIGWGHJdJ") is None
    # a call's result is not a literal
    assert _reason("new_token = raw_input('token: ')\n", "raw_input") == "code"


def test_skipped_values_are_counted_and_credentials_beside_them_still_found():
    text = ("secret: 'y7dg9kz69k7ww69a'\n"
            "token: '676642'\n"
            'public_key = "' + PUBLIC_KEY + '"\n'
            'password: "$6$rounds=5000$aFr56HjK3DrB8t3S$zhPQiS85cgBlNhUKKE6n"\n')
    spans, skipped = find_secrets(text, ext=".ts")
    assert [text[s.start:s.end] for s in spans] == ["y7dg9kz69k7ww69a"]
    assert skipped["secret_skipped_one_time_code"] == 1
    assert skipped["secret_skipped_derived"] == 1
    assert skipped["secret_skipped_password_hash"] >= 1


def test_a_port_then_a_fragment_or_query_is_not_a_url_password():
    """`http://google.com:80#@evil.tld/` (an SSRF note): `#`, `?` and `\\` end the authority (RFC 3986), so
    `80` is a port; a password that merely holds `#` (written unencoded, as configs do) is still one."""
    for line in ("http://google.com:80#@www.whitelisteddomain.tld/\n", "http://google.com:80?@evil.tld/\n",
                 "http://127.1.1.1:80#\\@127.2.2.2:80/\n"):
        assert find_secrets(line)[0] == [], line
    for line, value in (('DB="postgres://app:Pa55-w0rd@db.internal:5432/app"\n', "Pa55-w0rd"),
                        ('u = "amqp://svc:maple746#@rabbit:5672/"\n', "maple746#")):
        assert [line[s.start:s.end] for s in find_secrets(line)[0]] == [value]


def test_neighbour_flags():
    text = ("describe('totp', () => {\n"    # line 1
            "  const cases = [\n"           # 2
            "    { secret: 'abc' },\n"      # 3
            "  ];\n"                        # 4
            "  expect(check(cases)).toBe(true);\n"  # 5
            "});\n"                         # 6
            "\n\n\n\n"                      # 7-10
            "const key = 'x';\n")           # 11
    lines = text.split("\n")

    def flags(n, group="code", fences=None):
        start = sum(len(x) + 1 for x in lines[:n - 1])
        return neighbour_flags(text, start, start + len(lines[n - 1]), lines[n - 1], group, fences)

    assert flags(1) == ["assert_line"]  # describe(
    assert flags(3) == ["near_assert"]  # two lines from describe( and from expect(
    assert flags(5) == ["assert_line"]
    assert flags(11) == []  # more than three lines from any
    doc = "Run:\n```\n$ export PASSWORD=x\n```\npassword: y\n"
    fences = fence_starts(doc)
    assert fences == [5, 29]
    assert neighbour_flags(doc, 9, 28, "$ export PASSWORD=x", "doc", fences) == ["prompt", "doc_fenced"]
    assert neighbour_flags(doc, 33, 44, "password: y", "doc", fences) == ["doc_prose"]
    line = "PS> $pass = ConvertTo-SecureString 'x' -AsPlainText -Force"
    assert "prompt" in neighbour_flags(line, 0, len(line), line, "code", None)
    line = "ok = bcrypt.compare(password, stored)"
    assert neighbour_flags(line, 0, len(line), line, "code", None) == ["hash_line"]


def test_values_per_name_and_value_shapes():
    text = "token: 'q8Zr2mXk'\ntoken: 'w4Lp7nVb'\ntoken: 'w4Lp7nVb'\nsecret: 'Ty6uJm3c'\n"
    assert values_per_name(text, candidates(text)) == {"token": 2, "secret": 1}
    assert "sequential" in value_shape("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
    assert "sequential" in value_shape("1234567890abcdefghifjkl")
    assert "sequential" not in value_shape("y7dg9kz69k7ww69a")
    assert "keyword" in value_shape("range") and "keyword" not in value_shape("rangers")
    assert "domain_user" in value_shape("DOMAIN.LOCAL\\user1") and "domain_user" not in value_shape("a\\b\\c")


def test_context_crosses_in_the_features():
    line = "    token: '676642',"
    c = [c for c in candidates(line) if c.value(line) == "676642"][0]
    f = features(c, line, line_features(line), ".ts", 1, 4)
    assert "digits&len=2" in f and "secret&digits&len=2" in f  # 6 digits: length bucket 2 (6-7 characters)
    assert "secret&values=2" in f  # four values under this name in the file: bucket 2 (1 | 2 | 3-5 | 6+)
    line = 'assertEquals("OAuth oauth_nonce=\\"vLu2Kos75g973jCqidnP8SSE\\"", header);'
    c = [c for c in candidates(line) if c.value(line) == "vLu2Kos75g973jCqidnP8SSE"][0]
    lw, flags = line_features(line)
    f = features(c, line, (lw, flags + ["assert_line"]), ".java", 1)
    assert "assert_line&secret" in f and "assert_line&in_string=True" in f


def test_sequential_values_and_lone_jose_headers_are_skipped():
    """Issue 39, seventh round: an alphabet or a counting run is typed, not generated (half the value or more in
    runs of 4+ consecutive characters); a JWT's header alone (base64url of a JSON object with "alg") holds no
    claims and no signature. Random values and whole tokens beside them are still scored."""
    assert _reason('const secret = "0123456789abcdefghijklmnopqrstuv"\n', "0123456789abcdefghijklmnopqrstuv") == \
        "sequential"
    assert _reason('private const string MOCK_ACCESS_TOKEN = "at-0987654321";\n', "at-0987654321") == "sequential"
    assert _reason("KEY_STR = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/='\n",
                   "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") == "sequential"
    assert _reason("secret: 'y7dg9kz69k7ww69a'\n", "y7dg9kz69k7ww69a") is None
    assert _reason("password: 'abc7Qm19x'\n", "abc7Qm19x") is None  # one run of three: not half the value
    # {"alg":"RS256"} alone, as a JWS "protected" member is written; {"userId":1} is no JOSE header
    assert _reason("  protected: 'eyJhbGciOiJSUzI1NiJ9',\n", "eyJhbGciOiJSUzI1NiJ9") == "jose_header"
    assert _reason('token = "eyJ1c2VySWQiOjF9"\n', "eyJ1c2VySWQiOjF9") is None
    text = ("secret = 'abcdefghij123456'\n"
            "  protected: 'eyJhbGciOiJSUzI1NiJ9',\n"
            "api_secret = 'q8Zr2mXk9LtV4wPe'\n")
    spans, skipped = find_secrets(text, ext=".js")
    assert [text[s.start:s.end] for s in spans] == ["q8Zr2mXk9LtV4wPe"]
    assert skipped["secret_skipped_sequential"] == 1 and skipped["secret_skipped_jose_header"] == 1
