"""The scans the credential detector was sped up with (issue 39, fifth and sixth rounds), each checked against the
plain form it replaces: provider patterns that start with their literal, emails found from each '@', long-token
lines found with bytes.find, neighbour assertions from per-line results, the per-line caches, case-folded searches,
line words, the literal tests before patterns and the `repeats` feature without a search."""

from __future__ import annotations

import random
import re

from corpus.pii import secret_candidates as SC
from corpus.pii import secret_context as CX
from corpus.pii import secret_features as SF
from corpus.pii import secrets as S
from corpus.pii import text as T

# the provider patterns in their plain form: the character before the token checked by a lookbehind first
_PLAIN_PROVIDERS = {
    "github_token": (r"(?<![A-Za-z0-9_])(gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})",
                     ["ghp_" + "a1B2" * 9, "github_pat_" + "x_Y9" * 6, "gho_" + "Z" * 35]),
    "gitlab_token": (r"(?<![A-Za-z0-9_])(glpat-[A-Za-z0-9_\-]{20,})", ["glpat-" + "ab-_9" * 5]),
    "slack_token": (r"(?<![A-Za-z0-9])(xox[abposr]-[A-Za-z0-9-]{10,72})", ["xoxb-1234-abcdEFGH-99", "xoxz-123456789012"]),
    "stripe_key": (r"(?<![A-Za-z0-9])([rs]k_(?:live|test)_[0-9A-Za-z]{20,99})", ["sk_live_" + "4eC39Hq" * 4, "rk_test_" + "a" * 20]),
    "google_api_key": (r"(A(?<![A-Za-z0-9]A)Iza[0-9A-Za-z_\-]{35})(?![A-Za-z0-9_\-])", ["AIza" + "Sy-_x" * 7]),
    "google_oauth_secret": (r"(?<![A-Za-z0-9])(GOCSPX-[A-Za-z0-9_\-]{28})", ["GOCSPX-" + "abc_-DEF1234" * 2 + "wxyz"]),
    "anthropic_key": (r"(?<![A-Za-z0-9])(sk-ant-(?:api|admin)\d\d-[A-Za-z0-9_\-]{80,})", ["sk-ant-api03-" + "Ab9_" * 20]),
    "openai_key": (r"(?<![A-Za-z0-9])(sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}T3BlbkFJ[A-Za-z0-9_\-]{16,}"
                   r"|sk-proj-[A-Za-z0-9_\-]{40,})", ["sk-" + "a" * 20 + "T3BlbkFJ" + "b" * 20, "sk-proj-" + "Q7_" * 14]),
    "huggingface_token": (r"(?<![A-Za-z0-9_])(hf_[A-Za-z]{34})(?![A-Za-z0-9])", ["hf_" + "abcDEFghiJ" * 3 + "klmn"]),
    "npm_token": (r"(?<![A-Za-z0-9_])(npm_[A-Za-z0-9]{36})(?![A-Za-z0-9])", ["npm_" + "a1B2c3" * 6]),
    "twilio_key": (r"(S(?<![A-Za-z0-9]S)K[0-9a-f]{32})(?![A-Za-z0-9])", ["SK" + "0123456789abcdef" * 2]),
    "mailgun_key": (r"(k(?<![A-Za-z0-9]k)ey-[0-9a-f]{32})(?![A-Za-z0-9])", ["key-" + "fedcba9876543210" * 2]),
    "shopify_token": (r"(?<![A-Za-z0-9])(shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32})", ["shpat_" + "aB12" * 8, "shpxx_" + "a" * 32]),
    "digitalocean_token": (r"(?<![A-Za-z0-9])(do[opr]_v1_[a-f0-9]{64})", ["dop_v1_" + "0a" * 32]),
    "databricks_token": (r"(d(?<![A-Za-z0-9]d)api[a-f0-9]{32}(?:-\d)?)(?![A-Za-z0-9])", ["dapi" + "0123abcd" * 4 + "-2"]),
    "jwt": (r"(e(?<![A-Za-z0-9_\-]e)yJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,})",
            ["eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlX2hlcmU"]),
    "basic_auth": (r"B(?<!\wB)asic\s+((?:[A-Za-z0-9+/]{4}){2,}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?)(?![A-Za-z0-9+/=])",
                   ["Basic YWRtaW46czNjcjN0UGFzcw==", "Basic  dXNlcjpwYXNz"]),
}
_BEFORE = ["", " ", "x", "X", "_", "-", "=", '"', "\n", "9", "key=", "é"]
_AFTER = ["", " ", "x", "_", "-", "\n", '"', "="]


def test_provider_patterns_that_start_with_their_literal_find_what_the_plain_forms_find():
    shipped = {k: p for k, p, _, _ in S.PROVIDER_PATTERNS}
    for kind, (plain, tokens) in _PLAIN_PROVIDERS.items():
        plain_re = re.compile(plain)
        texts = [b + t + a for t in tokens for b in _BEFORE for a in _AFTER]
        texts += [" ".join(texts[:40]), "\n".join(reversed(texts[:40]))]
        found = 0
        for text in texts:
            want = [m.span(1) for m in plain_re.finditer(text)]
            assert [m.span(1) for m in shipped[kind].finditer(text)] == want, (kind, text)
            found += len(want)
        assert found > 0, kind  # the samples do exercise the pattern


def test_provider_rules_without_guards_still_find_each_family():
    text = ("token = ghp_" + "a1B2" * 9 + "\nxoxb-1234-abcdEFGH-99 and https://hooks.slack.com/services/T0000000A/"
            "B0000000B/abcdefghijklmnopqrstuvwx\nAccountKey=" + "Ab9+q7Z/" * 10 + "kP3mW2==;")
    kinds = [s.kind for s in S.find_rule_secrets(text)]
    assert kinds == ["github_token", "slack_token", "slack_webhook", "azure_storage_key"]


_PLAIN_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}@"
                          r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}"
                          r"(?![A-Za-z0-9\-]|\.[A-Za-z0-9])")


def test_emails_found_from_each_at_sign_are_the_matches_of_a_full_scan():
    texts = ["a@b.co", "x" * 63 + "@b.com", "x" * 64 + "@b.com", "x" * 65 + "@b.com", "-a@b.com .a@b.com",
             "é@b.com a.b@c.de", "@@a@b.com", "a@b.com.", "a@b.com@c.org", "a@b.cd.ef@gh.ij x@y.zz", "@", "",
             "mailto:ops+alerts@corp.example.io?subject=x", "user@host:22 git@github.com:org/repo.git",
             "icon@2x.png me@x.org"]
    rng = random.Random(39)
    texts += ["".join(rng.choice("ab.-_%+@ 1Z\né") for _ in range(rng.randint(1, 40))) + ".com" for _ in range(1500)]
    for text in texts:
        assert [m.span() for m in T._email_matches(text)] == [m.span() for m in _PLAIN_EMAIL.finditer(text)], text


def test_long_token_starts_are_the_plain_scan_s_matches():
    rng = random.Random(7)
    texts = ["", "a" * 19, "a" * 20, " " + "a" * 20 + "+/_-" + " b", "x" * 25 + "\n" + "y" * 21, "é" + "z" * 30]
    texts += ["".join(rng.choice("abZ9_-+/") if rng.random() < 0.8 else rng.choice(" .\n:é") for _ in range(rng.randint(0, 90)))
              for _ in range(1500)]
    for text in texts:
        assert SC.long_token_starts(text) == [m.start() for m in SC._LONG_TOKEN.finditer(text)], text


def test_neighbour_assertions_from_per_line_results_match_a_search_of_the_span():
    rng = random.Random(11)
    pieces = ["it", "IT", "describe", " ", "\t", "(", "\n", "x", "assert", "expect", "toBe", "İt", "should", "_",
              "verify", "\r", "test", "deep_equal"]
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 25)))
        starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
        ends = [i for i, ch in enumerate(text) if ch == "\n"] + [len(text)]
        lo = rng.choice(starts + ends)
        hi = rng.choice([e for e in starts + ends if e >= lo])
        assert CX._assert_between(text, lo, hi) == (CX._ASSERT.search(text, lo, hi) is not None), (text, lo, hi)
    # an `it` whose `(` is on the next line: only a search of the whole span sees it
    assert CX._assert_between("  it\n  ('works')\n", 0, 17) and not CX._assert_between("  it\n", 0, 5)


def test_cached_line_values_are_rebased_to_each_line_s_offset():
    S.clear_caches()
    line = 'db_password = "s3cr3tValue9"  # token: abcdefABCDEF123456'
    first = SC.line_candidates(line, 0, 1)
    again = SC.line_candidates(line, 500, 42)
    assert [c.value(line) for c in first] == ["s3cr3tValue9", "abcdefABCDEF123456"]
    assert [(c.start - 500, c.end - 500, 42, c.name, c.op, c.quote) for c in again] == \
        [(c.start, c.end, 42, c.name, c.op, c.quote) for c in first]
    assert SC._line_values.__wrapped__(line, False, False) == SC._line_values(line, False, False)


def _random_texts(seed: int, alphabet: list[str], n: int, longest: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, longest))) for _ in range(n)]


def test_folded_searches_find_what_the_case_insensitive_patterns_find():
    # the long s and the Kelvin sign match "s" and "k" under re.I: a string holding one is searched with re.I
    pieces = ["Assert", "EXPECT", "sha256", "Hash", "md5", "TODO", "changeMe", "PassWord", "ToKen", "Api", "x", " ",
              "\u017f", "\u212a", "İ", "ı", "é", "(", "_", "-", "1", "ey", "pw", "PIN", "Example", "\n"]
    patterns = [CX._ASSERT, CX._HASH, SF._CODE_WORDS, SF._PLACEHOLDER, S._PLACEHOLDER_WORDS, SC._CRED_WORD]
    texts = _random_texts(3, pieces, 3000, 8) + ["\u017fecret", "to\u212aen", "SECRET", "pa\u017f\u017f"]
    for pattern in patterns:
        found = SC.folded_search(pattern)
        for text in texts:
            assert found(text) == (pattern.search(text) is not None), (pattern.pattern[:30], text)
    assert SC.folded_search(re.compile("a", re.I))("A") and not SC.folded_search(re.compile("a", re.I))("b")


def test_folded_search_refuses_a_pattern_it_cannot_fold():
    for pattern in (re.compile("Token", re.I), re.compile("token")):
        try:
            SC.folded_search(pattern)
        except ValueError:
            continue
        raise AssertionError(pattern)


def test_a_line_s_known_words_are_its_name_words_in_the_vocabulary():
    pieces = ["db", "Password", "PASSWORD", "admin", "apiKey", "X", "_", " ", "=", "$", "-", "refreshtoken", "ABCDef",
              "9", "é", "K", "secretKEY", "getPasswd", "\u212aey", "İd", "userName"]
    for line in _random_texts(5, pieces, 2000, 12):
        assert SF._known_words(line) == frozenset(SF.name_words.__wrapped__(line)) & SF.NAME_WORDS, line


def test_candidates_with_known_token_runs_are_those_of_each_line_searched_alone():
    pieces = ["password = ", '"', "'", "abcDEF1234567890XYZabc", "tok", "=", ":", " ", "\n", "Bearer ",
              "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc", "é", "key: ", "0123456789abcdef0123456789abcdef"]
    for text in _random_texts(9, pieces, 400, 20):
        S.clear_caches()
        expected, offset = [], 0
        for lineno, line in enumerate(text.split("\n"), 1):
            cue = SC._LINE_CUE.search(line.lower()) is not None
            if cue or SC._LONG_TOKEN.search(line):
                expected += SC.line_candidates(line, offset, lineno, shapes_only=not cue)  # the line searched alone
            offset += len(line) + 1
        assert SC.candidates(text) == expected, text


def test_repeats_feature_without_a_search_is_the_search_s_answer():
    text = ('token = "abc123XYZ"\nother = "abc123XYZ"\npassword = "Zq9!Zq9!"\nsecret: abcabc\n'
            'key = "abcabcab"\nkey2 = "bcab"\n# Zq9!Zq9! again\n')
    seen = 0
    for c, feats in S.candidate_features(text, ".py"):
        v = text[c.start:c.end]
        plain = len(v) >= 3 and (text.find(v) < c.start or text.find(v, c.end) >= 0)
        assert (f"repeats&q={bool(c.quote)}" in feats) == plain, v
        seen += plain
    assert seen >= 3


def test_literal_tests_before_patterns_never_skip_a_match():
    template_values = _random_texts(13, ["<", ">", "$", "{", "}", "%", "(", ")", "s", "d", "env", "ENV", "[", "x",
                                         "process.", "os.", "environ", "get", "_"], 3000, 6)
    for v in template_values:
        if S._TEMPLATE.search(v):
            assert any(k in v for k in ("<", "$", "{", "%", "env", "ENV")), v
    for before in _random_texts(17, [" ", ",", "[", "=", ":", '"', "'", "a", "\t", "]"], 3000, 10):
        if SC._LIST_REV.match(before):
            assert "[" in before and before.lstrip()[:1] in (",", "["), before
    for part in _random_texts(19, ["Basic ", "bearer ", "TOKEN ", "Digest ", "OAuth ", "ApiKey ", "key ", "SSWS ",
                                   "abcdef123", " ", "x"], 2000, 6):
        if SC._AUTH.search(part):
            assert any(w in part.lower() for w in ("key", "token", "basic", "bearer", "digest", "oauth", "ssws"))
