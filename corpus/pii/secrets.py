"""Credentials and personal data in source code.

Three families of evidence:
1. Rules, where the shape is the evidence: known providers' key formats (AWS, GitHub, GitLab, Slack,
   Stripe, Google, OpenAI, Anthropic, Hugging Face, npm, PyPI, SendGrid, Twilio, Mailgun, Shopify,
   Telegram, DigitalOcean, Databricks, Azure storage, JWTs), private-key blocks, `user:pass@` in URLs.
   Obvious placeholders ("changeme", "<your-key>", "${VAR}", AWS's "...EXAMPLE" keys) are skipped and
   counted.
2. The credential model (secret_candidates.py -> secret_features.py -> secret_model.py): every value a
   line binds to a name, flag, URL, auth scheme or XML element, or that has a credential's shape, is
   scored from its name words, value shape, binding, file type and context (secret_context.py); values at
   or above the shipped threshold are credentials. Values that are not the secret by what they are (public
   keys, hashes, ciphertext, password hashes, one-time codes, URLs, calls, a JWT's header alone, alphabets
   and counting runs: `skip_reason`) are skipped and counted first. Trained and evaluated on CredData by
   held-out repository; the threshold is the one with the most room to both goals in the worst group.
3. Emails (the one rule of text.py); test addresses (example.com/org/net, *.test, localhost) are
   skipped and counted.

Every span says which rule or model score found it (`SecretSpan.evidence`), without the value.
"""

from __future__ import annotations

import base64
import json
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from .secret_candidates import NOT_A_PORT, Candidate, candidates, folded_search
from .secret_context import fence_starts, neighbour_flags, value_extents, values_per_name
from . import secret_candidates, secret_context, secret_features
from .secret_features import DER_PUBLIC, DERIVED_WORDS, EXT_GROUP, features, line_features, name_class, name_words, \
    value_shape
from .secret_model import load, probability
from .text import email_spans, is_test_email

PLACEHOLDERS = {"key": "<KEY>", "password": "<PASSWORD>", "private_key": "<PRIVATE_KEY>", "email": "<EMAIL>"}

# (kind, pattern, group holding the value, placeholder). A pattern starts with its literal prefix and checks
# the character before it after (`ghp_(?<![A-Za-z0-9_]ghp_)`, not `(?<![A-Za-z0-9_])ghp_`): a pattern that
# starts with a literal is searched for that literal in C, as fast as a `str.find`, while one that starts
# with a lookbehind is entered at every position of the text (20x slower on CredData's files).
PROVIDER_PATTERNS: list[tuple[str, re.Pattern, int, str]] = [(k, re.compile(p), g, ph) for k, p, g, ph in [
    ("private_key", r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |PGP |ENCRYPTED )?PRIVATE KEY(?: BLOCK)?-----"
                    r"[\s\S]{0,8000}?-----END (?:RSA |EC |DSA |OPENSSH |PGP |ENCRYPTED )?PRIVATE KEY(?: BLOCK)?-----",
     0, "private_key"),
    ("aws_access_key", r"(A(?<![A-Za-z0-9]A)(?:KIA|SIA|BIA|CCA|GPA|IDA|IPA|NPA|NVA|PKA|ROA|SCA)[0-9A-Z]{16})"
                       r"(?![A-Za-z0-9])", 1, "key"),
    ("github_token", r"(g(?<![A-Za-z0-9_]g)(?:h[pousr]_[A-Za-z0-9]{36,255}|ithub_pat_[A-Za-z0-9_]{22,255}))", 1, "key"),
    ("gitlab_token", r"(glpat-(?<![A-Za-z0-9_]glpat-)[A-Za-z0-9_\-]{20,})", 1, "key"),
    ("slack_token", r"(xox(?<![A-Za-z0-9]xox)[abposr]-[A-Za-z0-9-]{10,72})", 1, "key"),
    ("slack_webhook", r"https://hooks\.slack\.com/services/(T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{20,})", 1, "key"),
    ("stripe_key", r"([rs]k_(?<![A-Za-z0-9][rs]k_)(?:live|test)_[0-9A-Za-z]{20,99})", 1, "key"),
    ("google_api_key", r"(AIza(?<![A-Za-z0-9]AIza)[0-9A-Za-z_\-]{35})(?![A-Za-z0-9_\-])", 1, "key"),
    ("google_oauth_secret", r"(GOCSPX-(?<![A-Za-z0-9]GOCSPX-)[A-Za-z0-9_\-]{28})", 1, "key"),
    ("anthropic_key", r"(sk-ant-(?<![A-Za-z0-9]sk-ant-)(?:api|admin)\d\d-[A-Za-z0-9_\-]{80,})", 1, "key"),
    ("openai_key", r"(sk-(?<![A-Za-z0-9]sk-)(?:(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}T3BlbkFJ[A-Za-z0-9_\-]{16,}"
                   r"|proj-[A-Za-z0-9_\-]{40,}))", 1, "key"),
    ("huggingface_token", r"(hf_(?<![A-Za-z0-9_]hf_)[A-Za-z]{34})(?![A-Za-z0-9])", 1, "key"),
    ("npm_token", r"(npm_(?<![A-Za-z0-9_]npm_)[A-Za-z0-9]{36})(?![A-Za-z0-9])", 1, "key"),
    ("pypi_token", r"(pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,})", 1, "key"),
    ("sendgrid_key", r"(SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43})", 1, "key"),
    ("twilio_key", r"(SK(?<![A-Za-z0-9]SK)[0-9a-f]{32})(?![A-Za-z0-9])", 1, "key"),
    ("mailgun_key", r"(key-(?<![A-Za-z0-9]key-)[0-9a-f]{32})(?![A-Za-z0-9])", 1, "key"),
    ("shopify_token", r"(shp(?<![A-Za-z0-9]shp)(?:at|ss|ca|pa)_[a-fA-F0-9]{32})", 1, "key"),
    ("telegram_bot_token", r"(?<![A-Za-z0-9])(\d{8,10}:AA[A-Za-z0-9_\-]{33})(?![A-Za-z0-9_\-])", 1, "key"),
    ("digitalocean_token", r"(do[opr]_v1_(?<![A-Za-z0-9]do[opr]_v1_)[a-f0-9]{64})", 1, "key"),
    ("databricks_token", r"(dapi(?<![A-Za-z0-9]dapi)[a-f0-9]{32}(?:-\d)?)(?![A-Za-z0-9])", 1, "key"),
    ("azure_storage_key", r"AccountKey=([A-Za-z0-9+/]{86}==)", 1, "key"),
    ("jwt", r"(eyJ(?<![A-Za-z0-9_\-]eyJ)[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,})", 1, "key"),
    # NATS nkey seeds: "S" + the key type (operator, account, user, cluster, server, curve), base32
    ("nkey_seed", r"(S(?<![A-Z0-9]S)[ONAUCXP][A-Z2-7]{56})(?![A-Z0-9])", 1, "key"),
    ("wechat_app_id", r"(w(?<![A-Za-z0-9]w)x[0-9a-f]{16})(?![A-Za-z0-9])", 1, "key"),
    # the private members of a JSON Web Key (RFC 7518 6.2.2, 6.3.2, 6.4): d, p, q, dp, dq, qi, k (next to "kty")
    ("jwk_private", r"(?<![\w\-])[\"']?(?:d|p|q|dp|dq|qi|k)[\"']?\s*[:=]\s*[\"']([A-Za-z0-9_\-]{20,})[\"']", 1, "key"),
    # DER private keys in base64 without PEM armour: RSAPrivateKey / PKCS#8 start with version 0, EC with 1
    ("der_private_key", r"(M(?<![A-Za-z0-9+/]M)(?:II[A-Za-z0-9+/]{3}IBA[AD]|HcCAQEE|IGHAgEA)"
                        r"[A-Za-z0-9+/]{60,}={0,2})", 1, "private_key"),
    # HTTP Basic credentials (RFC 7617): base64 of "user:password"
    ("basic_auth", r"Basic(?<!\wBasic)\s+((?:[A-Za-z0-9+/]{4}){2,}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?)(?![A-Za-z0-9+/=])", 1,
     "password"),
    ("url_credentials", r"\b[a-z][a-z0-9+.\-]{1,20}+://[^\s:/@\"'<>]{0,64}+:(" + NOT_A_PORT +
     r"[^\s@/\"'<>]{3,128}+)@[A-Za-z0-9.\-\[%${<]",
     1, "password"),
]]

# literal parts a provider pattern needs, tested with `in` before the pattern scans the text: only for the
# patterns that do not start with a literal (the others' own scan costs what one `in` test costs)
_GUARDS = {"stripe_key": ("k_live_", "k_test_"), "telegram_bot_token": (":AA",), "jwk_private": ("kty",),
           "url_credentials": ("://",)}

_PLACEHOLDER_WORDS = re.compile(  # (?=[...]): the alternatives' first letters, tested once per position
    r"(?=[cryesdpftmix*.ln_])(?:changeme|change_me|change-me|changethis|replace|your|example|sample|dummy|placeholder|fake|mock|"
    r"todo|fixme|redacted|insert|enter_|_here|xxxx|\*\*\*|\.\.\.|lorem|notreal|not_real|not-a-|foobar)", re.I)
_has_placeholder_word = folded_search(_PLACEHOLDER_WORDS)
_WEAK_DEFAULT = re.compile(r"(?i)^(?:my)?(?:secret|password|passwd|pass|pwd|changeme|admin|root|test|testing|default|"
                           r"token|key|apikey|foo|bar|baz|qwerty|letmein|guest|user|demo|none|null|undefined|"
                           r"true|false|abc|p@ssw0rd|passw0rd|p@ssword|s3cr3t)[\d!._-]{0,4}$")
_TEMPLATE = re.compile(r"<[^>]*>|\$\{|\{\{|\{%|%\(\w+\)[sd]|%s$|\{\}|\{[A-Za-z_0-9]*\}|^\$[A-Za-z_]|^%[A-Za-z_]+%$|"
                       r"process\.env|os\.environ|getenv|ENV\[|^env\(|^\$\(")
# (every alternative of _TEMPLATE holds "<", "$", "{", "%", "env" or "ENV": placeholder_reason tests those first)
_LABEL_WORD = re.compile(r"[A-ZÀ-Þ][a-zß-ÿ]+")
_REGEX_OR_CODE = re.compile(r"\[[^\]]*\]|\(\?|\\[dswbDSWB]|\{\d+,?\d*\}|\$\(|`")


@dataclass(frozen=True)
class SecretSpan:
    start: int
    end: int
    kind: str
    placeholder: str  # key into PLACEHOLDERS
    evidence: str = ""  # the rule, or the model's score with the name and binding (never the value)


@lru_cache(maxsize=16384)
def placeholder_reason(value: str) -> str | None:
    """Why `value` is not a real credential, or None when it may be one (cached: values recur across files)."""
    v = value.strip()
    if len(set(v.lower())) <= 2 or set(v) <= set("xX*.#-_0 "):
        return "placeholder"
    if (("<" in v or "$" in v or "{" in v or "%" in v or "env" in v or "ENV" in v) and _TEMPLATE.search(v)) or \
            _has_placeholder_word(v) or _WEAK_DEFAULT.match(v):
        return "placeholder"
    if _REGEX_OR_CODE.search(v):
        return "label"  # a pattern or an expression, not a value
    if v.endswith(":") or _LABEL_WORD.fullmatch(v):
        return "label"  # "Password:", "Passwort", "Contraseña": a form's label, not its value
    if "EXAMPLE" in v:
        return "placeholder"  # AWS's documented example keys
    if len(v) >= 4 and (v.lower() in "0123456789012345678" or v.lower() in "abcdefghijklmnopqrstuvwxyz"):
        return "placeholder"  # 123456, abcdef
    return None


# a value named for a public key, a hash, a digest or a fingerprint is shared by design or one-way, and an
# encrypted or wrapped one is ciphertext, useless without its key: none is the secret itself (CredData dev set:
# 1 of 314 public/hash-named candidates is labelled a credential, and 10 of 488 encrypted/wrapped-named ones, 8 of
# them in one repository). A name that also says hmac, signing, secret or private names a key that signs or
# hides something (HMAC_SHA256_SECRET, encrypted_private_key), so it stays.
_KEEPS_SECRET = frozenset("hmac sign signing signature secret private priv".split())
# a six- to eight-digit `token`/`otp`/`code`: a TOTP/HOTP one-time code (RFC 4226/6238), valid for seconds, e.g.
# a test's expected code beside the seed that makes it; the seed is the credential
_ONE_TIME_NAMES = frozenset("token otp totp hotp code passcode".split())
# a crypt(3)/PHC password hash ($2b$12$..., $6$rounds=...$, $argon2id$v=19$...): the stored one-way form of a
# password, which does not log anyone in (CredData dev set: 0 of 34 such candidates is a credential)
_HASH_ID = r"\$(?:1|2[abxy]?|5|6|7|y|gy|apr1|md5|sha1|argon2(?:id|i|d)|pbkdf2[\w\-]*|scrypt|bcrypt[\w\-]*)\$"
_PASSWORD_HASH = re.compile(_HASH_ID)
_BINDINGS = frozenset(("=", ":", ":=", "=>"))
_PORT_PATH = re.compile(r"\d{1,5}(?:/|$)")
_IN_PASSWORD_HASH = re.compile(_HASH_ID + r"[^\s\"'`]*$")  # the text before a field cut out of such a hash


def skip_reason(c: Candidate, text: str) -> str | None:
    """Why candidate c of text is never scored: placeholder_reason; the value is a password hash or a field of
    one ("password_hash"); a call ("code"); a public key ("derived") or a JWT's header alone ("jose_header"); a
    `scheme://` URL read as `name: //...` ("url"); its name says the value is public or one-way or encrypted
    ("derived") or a one-time code ("one_time_code"); an alphabet or counting run ("sequential"). None when it
    may be a credential."""
    value = text[c.start:c.end]
    if (value.startswith("$") and _PASSWORD_HASH.match(value)) or \
            (text.find("$", max(0, c.start - 200), c.start) >= 0 and
             _IN_PASSWORD_HASH.search(text, max(0, c.start - 200), c.start)):
        return "password_hash"  # before placeholder_reason, which reads a leading `$` as a template
    reason = placeholder_reason(value)
    if reason:
        return reason
    if not c.quote and text[c.end:c.end + 1] == "(" and c.op in _BINDINGS:
        return "code"  # `token = raw_input(...)`: a call's result, not a literal (0 of 4,628 in the dev set)
    if value.startswith(DER_PUBLIC):
        return "derived"  # an X.509 public key (SubjectPublicKeyInfo), named or not
    if value.startswith("eyJ") and "." not in value and _jose_header(value):
        return "jose_header"  # a JWT's header alone (`protected: 'eyJhbGciOi...'`): no claims, no signature
    if c.op == ":" and value.startswith("//"):
        return "url"
    if c.name:
        words = name_words(c.name)
        if c.op == ":" and _PORT_PATH.match(value) and name_class(words) not in ("password", "secret", "key"):
            return "url"  # host:8080/path read as `host: 8080/path`
        if not DERIVED_WORDS.isdisjoint(words) and _KEEPS_SECRET.isdisjoint(words):
            return "derived"
        if words and words[-1] in _ONE_TIME_NAMES and value.isdigit() and 6 <= len(value) <= 8:
            return "one_time_code"
    # last, so a value skipped for another reason costs no shape (the model computes it anyway, cached)
    if len(value) >= 6 and "sequential" in value_shape(value):
        return "sequential"  # an alphabet or a counting run (1234567890abcdef..., at-0987654321): typed, not generated
    return None


def _jose_header(value: str) -> bool:
    """value is base64url of a JSON object with an "alg" member: a JOSE header (RFC 7515 4.1), public by design."""
    try:
        header = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(header, dict) and "alg" in header


def _basic_pair(value: str) -> bool:
    try:
        pair = base64.b64decode(value, validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return False
    return ":" in pair and pair.isprintable() and not placeholder_reason(pair.split(":", 1)[1] or "x")


def _url_matches(pattern: re.Pattern, text: str):
    """pattern.finditer(text) for the URL-credentials pattern, searched only around each "://": every match
    holds exactly one "://" (its scheme, user and password cannot hold ':' or '/'), at most 21 characters
    after its start and 200 before its end. Same matches as a scan of the whole text, 4x faster."""
    pos, at = 0, text.find("://")
    while at >= 0:
        m = pattern.search(text, max(pos, at - 22), at + 250)
        if m is not None:
            yield m
            pos = m.end()
        at = text.find("://", max(at + 1, pos))


def find_rule_secrets(text: str, kinds: frozenset[str] | None = None,
                      skipped: Counter | None = None) -> list[SecretSpan]:
    """Provider key shapes, private-key blocks and URL passwords (placeholders skipped and counted)."""
    skipped = Counter() if skipped is None else skipped
    out = []
    for kind, pattern, group, ph in PROVIDER_PATTERNS:
        if kinds is not None and kind not in kinds:
            continue
        guard = _GUARDS.get(kind)
        if guard is not None and not any(g in text for g in guard):
            continue  # the pattern's literal part is not in the text: skip the scan
        for m in (_url_matches(pattern, text) if kind == "url_credentials" else pattern.finditer(text)):
            value = m.group(group)
            if kind == "private_key" and len(re.findall(r"[A-Za-z0-9+/=]", value)) < 200:
                skipped["secret_skipped_placeholder"] += 1
                continue
            if kind == "jwk_private" and "kty" not in text[max(0, m.start() - 600):m.end() + 600]:
                continue  # a JWK member only inside a JSON Web Key
            if kind == "basic_auth" and not _basic_pair(value):
                continue  # base64 that does not decode to user:password
            if kind != "private_key" and (reason := placeholder_reason(value)):
                skipped[f"secret_skipped_{reason}"] += 1
                continue
            out.append(SecretSpan(m.start(group), m.end(group), kind, ph, f"rule:{kind}"))
    return out


def candidate_features(text: str, ext: str = "", skip=None):
    """(candidate, features) for every candidate value of the model in text; a candidate for which
    `skip(candidate)` is true comes as (candidate, None), before any feature is computed."""
    cands = candidates(text)
    per_line = Counter(c.line for c in cands)  # counted over all candidates, skipped ones included
    n_values = values_per_name(text, cands) if cands else {}
    extents = value_extents(text, cands)
    group = EXT_GROUP.get(ext.lower(), "other")
    fences = fence_starts(text) if cands and group == "doc" else None
    line_cache: dict[int, tuple] = {}
    for c in cands:
        if skip is not None and skip(c):
            yield c, None
            continue
        if c.line not in line_cache:
            s = text.rfind("\n", 0, c.start) + 1
            e = text.find("\n", c.start)
            e = len(text) if e < 0 else e
            lw, flags = line_features(text[s:e])
            line_cache[c.line] = (lw, flags + neighbour_flags(text, s, e, text[s:e], group, fences))
        lowest, highest = extents[text[c.start:c.end]]
        repeated = lowest <= c.start - (c.end - c.start) or highest >= c.end  # another candidate, not overlapping c
        yield c, features(c, text, line_cache[c.line], ext, per_line[c.line], n_values.get(c.name, 1), repeated)


def _model_kind(c: Candidate, text: str) -> str:
    words = name_words(c.name)
    cls = name_class(words)
    if cls == "password" or c.op == "url":
        return "password"
    if "aws" in words:
        return "aws_secret_key"
    if cls == "none" and c.op == "shape:uuid":
        return "uuid"
    return "generic_secret"


def find_model_secrets(text: str, ext: str = "", kinds: frozenset[str] | None = None,
                       skipped: Counter | None = None) -> list[SecretSpan]:
    weights, threshold = load()
    out = []
    reasons: dict[int, str] = {}

    def placeholder(c: Candidate) -> bool:  # placeholders, labels, public values, one-time codes: counted, never scored
        reason = skip_reason(c, text)
        if reason:
            reasons[c.start] = reason
        return reason is not None

    for c, feats in candidate_features(text, ext, skip=placeholder):
        if feats is None:
            if skipped is not None:
                skipped[f"secret_skipped_{reasons[c.start]}"] += 1
            continue
        p = probability(feats, weights)
        if p < threshold:
            if skipped is not None and name_class(name_words(c.name)) in ("password", "secret", "key"):
                skipped["secret_skipped_model_below_threshold"] += 1
            continue
        kind = _model_kind(c, text)
        if kinds is None or kind in kinds:
            out.append(SecretSpan(c.start, c.end, kind, "password" if kind == "password" else "key",
                                  f"model:{p:.2f} name={c.name[:40]!r} op={c.op}"))
    return out


def find_secrets(text: str, kinds: frozenset[str] | None = None, ext: str = "") -> tuple[list[SecretSpan], Counter]:
    """Non-overlapping secret spans in text order, and counters of skipped placeholders.

    `ext` is the file's extension (".py", ".yml"; "" when unknown), one of the model's features."""
    skipped: Counter = Counter()
    spans = find_rule_secrets(text, kinds, skipped)
    spans += find_model_secrets(text, ext, kinds, skipped)
    if kinds is None or "email" in kinds:
        for start, end in email_spans(text):
            if is_test_email(text[start:end]):
                skipped["email_skipped_test_address"] += 1
            else:
                spans.append(SecretSpan(start, end, "email", "email", "rule:email"))
    taken: list[SecretSpan] = []
    for s in spans:  # earlier evidence wins overlaps: rules, then the model, then emails
        if all(s.end <= t.start or s.start >= t.end for t in taken):
            taken.append(s)
    return sorted(taken, key=lambda s: s.start), skipped


def clear_caches() -> None:
    """Empty every cache of the detector (a benchmark's timed repeat starts cold, like a fresh process)."""
    placeholder_reason.cache_clear()
    secret_candidates.clear_caches()
    secret_context.clear_caches()
    secret_features.clear_caches()


KINDS = tuple(k for k, *_ in PROVIDER_PATTERNS) + ("aws_secret_key", "password", "generic_secret", "uuid", "email")


def redact_secrets(text: str, spans: list[SecretSpan], placeholders: dict[str, str] = PLACEHOLDERS) -> str:
    out, pos = [], 0
    for s in spans:
        out += [text[pos:s.start], placeholders[s.placeholder]]
        pos = s.end
    out.append(text[pos:])
    return "".join(out)
