"""Credentials and personal data in source code.

Three families of evidence:
1. Known providers' key formats (AWS, GitHub, GitLab, Slack, Stripe, Google, OpenAI, Anthropic,
   Hugging Face, npm, PyPI, SendGrid, Twilio, Mailgun, Shopify, Telegram, DigitalOcean,
   Databricks, Azure storage, JWTs) and private-key blocks: the shape is the evidence.
2. A value assigned to a credential-like name (`password = "..."`, `"api_key": "..."`,
   `SECRET_KEY: ...`, `<password>...</password>`, `user:pass@host` in URLs, `Bearer ...`):
   passwords need two character classes or 10+ characters; tokens need length and entropy.
3. Emails (the one rule of text.py).

Obvious placeholders are not secrets and are counted instead: "secret", "changeme", "xxx",
"<your-key>", "${VAR}", "{{ token }}", AWS's documented "...EXAMPLE" keys, labels in other
languages ("Passwort"), identifiers ("password_confirmation"), and test e-mail addresses
(example.com/org/net, *.test, localhost).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from .text import email_spans, is_test_email

PLACEHOLDERS = {"key": "<KEY>", "password": "<PASSWORD>", "private_key": "<PRIVATE_KEY>", "email": "<EMAIL>"}

# (kind, pattern, group holding the value, placeholder)
PROVIDER_PATTERNS: list[tuple[str, re.Pattern, int, str]] = [(k, re.compile(p), g, ph) for k, p, g, ph in [
    ("private_key", r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |PGP |ENCRYPTED )?PRIVATE KEY(?: BLOCK)?-----"
                    r"[\s\S]{0,8000}?-----END (?:RSA |EC |DSA |OPENSSH |PGP |ENCRYPTED )?PRIVATE KEY(?: BLOCK)?-----",
     0, "private_key"),
    ("aws_access_key", r"(?<![A-Za-z0-9])((?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[0-9A-Z]{16})"
                       r"(?![A-Za-z0-9])", 1, "key"),
    ("github_token", r"(?<![A-Za-z0-9_])(gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})", 1, "key"),
    ("gitlab_token", r"(?<![A-Za-z0-9_])(glpat-[A-Za-z0-9_\-]{20,})", 1, "key"),
    ("slack_token", r"(?<![A-Za-z0-9])(xox[abposr]-[A-Za-z0-9-]{10,72})", 1, "key"),
    ("slack_webhook", r"https://hooks\.slack\.com/services/(T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{20,})", 1, "key"),
    ("stripe_key", r"(?<![A-Za-z0-9])([rs]k_(?:live|test)_[0-9A-Za-z]{20,99})", 1, "key"),
    ("google_api_key", r"(?<![A-Za-z0-9])(AIza[0-9A-Za-z_\-]{35})(?![A-Za-z0-9_\-])", 1, "key"),
    ("google_oauth_secret", r"(?<![A-Za-z0-9])(GOCSPX-[A-Za-z0-9_\-]{28})", 1, "key"),
    ("anthropic_key", r"(?<![A-Za-z0-9])(sk-ant-(?:api|admin)\d\d-[A-Za-z0-9_\-]{80,})", 1, "key"),
    ("openai_key", r"(?<![A-Za-z0-9])(sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}T3BlbkFJ[A-Za-z0-9_\-]{16,}"
                   r"|sk-proj-[A-Za-z0-9_\-]{40,})", 1, "key"),
    ("huggingface_token", r"(?<![A-Za-z0-9_])(hf_[A-Za-z]{34})(?![A-Za-z0-9])", 1, "key"),
    ("npm_token", r"(?<![A-Za-z0-9_])(npm_[A-Za-z0-9]{36})(?![A-Za-z0-9])", 1, "key"),
    ("pypi_token", r"(pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,})", 1, "key"),
    ("sendgrid_key", r"(SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43})", 1, "key"),
    ("twilio_key", r"(?<![A-Za-z0-9])(SK[0-9a-f]{32})(?![A-Za-z0-9])", 1, "key"),
    ("mailgun_key", r"(?<![A-Za-z0-9])(key-[0-9a-f]{32})(?![A-Za-z0-9])", 1, "key"),
    ("shopify_token", r"(?<![A-Za-z0-9])(shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32})", 1, "key"),
    ("telegram_bot_token", r"(?<![A-Za-z0-9])(\d{8,10}:AA[A-Za-z0-9_\-]{33})(?![A-Za-z0-9_\-])", 1, "key"),
    ("digitalocean_token", r"(?<![A-Za-z0-9])(do[opr]_v1_[a-f0-9]{64})", 1, "key"),
    ("databricks_token", r"(?<![A-Za-z0-9])(dapi[a-f0-9]{32}(?:-\d)?)(?![A-Za-z0-9])", 1, "key"),
    ("azure_storage_key", r"AccountKey=([A-Za-z0-9+/]{86}==)", 1, "key"),
    ("jwt", r"(?<![A-Za-z0-9_\-])(eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,})", 1, "key"),
    ("url_credentials", r"\b[a-z][a-z0-9+.\-]{1,20}://[^\s:/@\"'<>]{0,64}:([^\s@/\"'<>]{3,128})@[A-Za-z0-9.\-\[]",
     1, "password"),
    ("bearer_token", r"\b(?:Bearer|bearer|BEARER|Token) ((?=[A-Za-z\-._~+/]*\d)[A-Za-z0-9\-._~+/]{20,}=*)"
                     r"(?![A-Za-z0-9\-._~+/=])", 1, "key"),
]]

# Credential-like names: one of these words as a component of the identifier (snake, kebab, dotted or camel).
_PASSWORD_NAME = re.compile(r"(?:^|_)(?:pass|password|passwd|passphrase|pwd|pw|passwort|contrasena|senha|motdepasse)(?:_|$)"
                            r"|(?:password|passwd|pwd)$")
_TOKEN_NAME = re.compile(r"(?:^|_)(?:secret|secrets|token|tokens|apikey|api_key|access_key|accesskey|private_key|"
                         r"privatekey|secret_key|secretkey|auth_key|authkey|signing_key|encryption_key|master_key|"
                         r"session_key|app_key|consumer_key|client_secret|credentials?|auth|bearer|webhook_secret|"
                         r"api_secret|access_token|refresh_token|auth_token|license_key)(?:_|$)"
                         r"|(?:secret|token|apikey|secretkey|privatekey|accesskey)$")
_KEY_NAME = re.compile(r"(?:^|_)key$|(?:hmac|aes|rsa|jwt|cipher|crypt|sign|signing|app|master)key$")
_NOT_A_VALUE_NAME = re.compile(r"_(?:url|uri|path|file|filename|name|id|length|len|type|field|label|header|env|var|"
                               r"prompt|hint|regex|pattern|endpoint|dir|count|min|max|policy|expiry|expires|timeout|"
                               r"ttl|prefix|suffix|format|mode|method|scope|scopes|source|location|help|text|message|"
                               r"placeholder|title|error|column|param|key_name|input|class|selector|strength|"
                               r"required|enabled|reset|confirm|confirmation|changed|rule|rules|validator)$")

_ASSIGN = re.compile(
    r"(?<![A-Za-z0-9_])(?:#define\s+)?(?P<name>[A-Za-z_$@][A-Za-z0-9_.\-]{1,60})[\"']?\]?(?:\[\d*\])?"
    r"(?P<op>[ \t]*(?:(?::[ \t]*[&A-Za-z_][\w\[\]<>&'., |]{0,30}?[ \t]*)?=(?![=>~])|:=|=>|\|\|=|\?\?=|:(?![:/])"
    r"|(?<=[\"'])[ \t]*,|[ \t](?=[ \t]*[\"']))[ \t]*)"
    r"(?:[rbuf]?(?P<q>[\"'`])(?P<val>[^\"'`\n\\]{1,300})(?P=q)|(?P<bare>[A-Za-z0-9!@#%^&*+/=_.\-~]{6,300})(?=[\s,;]|$))"
)
_CALL_BEFORE = re.compile(r"\([ \t]*[\"']?$")
_CODE_VALUE = re.compile(r"^\w+=\w+$")
_LOWER_PATH = re.compile(r"^[a-z0-9_.=\-]+(?:/[a-z0-9_.=\-]+)+/?$")
_BARE_VALUE = re.compile(r"[0-9!@#%^&*+/=]")
_DOTTED_NAME = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
_REGEX_OR_CODE = re.compile(r"\[[^\]]*\]|\(\?|\\[dswbDSWB]|\{\d+,?\d*\}|\$\(|`")
_XML = re.compile(r"<(?P<name>[A-Za-z_][\w\-.]{1,40})>(?P<val>[^<\s]{4,300})</(?P=name)>")

_PLACEHOLDER_WORDS = re.compile(
    r"(?i)changeme|change_me|change-me|changethis|replace|your|example|sample|dummy|placeholder|fake|mock|"
    r"todo|fixme|redacted|insert|enter_|_here|xxxx|\*\*\*|\.\.\.|lorem|notreal|not_real|not-a-|foobar")
_WEAK_DEFAULT = re.compile(r"(?i)^(?:my)?(?:secret|password|passwd|pass|pwd|changeme|admin|root|test|testing|default|"
                           r"token|key|apikey|foo|bar|baz|qwerty|letmein|guest|user|demo|none|null|undefined|"
                           r"true|false|abc|p@ssw0rd|passw0rd|p@ssword|s3cr3t)[\d!._-]{0,4}$")
_TEMPLATE = re.compile(r"<[^>]*>|\$\{|\{\{|\{%|%\(\w+\)[sd]|%s$|\{\}|\{[A-Za-z_0-9]*\}|^\$[A-Za-z_]|^%[A-Za-z_]+%$|"
                       r"process\.env|os\.environ|getenv|ENV\[|^env\(|^\$\(")
_IDENTIFIER = re.compile(r"^[a-z]+\d*(?:[_\-.:](?:[a-z]+\d?|\d{1,3}))+$|^[A-Z]+(?:_[A-Z]+\d?)+$|^[a-z]+(?:[A-Z][a-z]+)+$|"
                         r"^[A-Z][a-z]+(?:[A-Z][a-z]+)*$|^[a-z]+$")  # labels, keys, env var names


@dataclass(frozen=True)
class SecretSpan:
    start: int
    end: int
    kind: str
    placeholder: str  # key into PLACEHOLDERS


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


def _classes(value: str) -> int:
    return sum((any(c.islower() for c in value), any(c.isupper() for c in value),
                any(c.isdigit() for c in value), any(not c.isalnum() for c in value)))


def placeholder_reason(value: str) -> str | None:
    """Why `value` is not a real credential, or None when it may be one."""
    v = value.strip()
    if len(set(v.lower())) <= 2 or set(v) <= set("xX*.#-_0 "):
        return "placeholder"
    if _TEMPLATE.search(v) or _PLACEHOLDER_WORDS.search(v) or _WEAK_DEFAULT.match(v):
        return "placeholder"
    if _REGEX_OR_CODE.search(v):
        return "label"  # a pattern or an expression, not a value
    if "EXAMPLE" in v:
        return "placeholder"  # AWS's documented example keys
    if len(v) >= 4 and (v.lower() in "0123456789012345678" or v.lower() in "abcdefghijklmnopqrstuvwxyz"):
        return "placeholder"  # 123456, abcdef
    return None


def _normalise_name(name: str) -> str:
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name.lstrip("$@"))
    return re.sub(r"[.\-]+", "_", name).lower()


def _label_reason(value: str, norm: str, is_password: bool) -> str | None:
    """Why a value assigned to a credential-like name is a label, a name or code, not a secret."""
    core = value.strip(" :*…")
    if core != value and core.isalpha():
        return "label"  # "Password:", "Passwort*"
    if any(c.isspace() for c in value) or not value.isascii() or _normalise_name(value) in norm \
            or value.startswith(("/", "./", "http")) or "://" in value:
        return "label"
    if _IDENTIFIER.match(value) and not (is_password and "-" in value and "_" not in value
                                         and not re.search(r"(?i)pass|pwd|word|user|name|field", value)):
        return "label"  # keys and labels; a kebab-case passphrase assigned to a password stays
    if value.isalpha() or _DOTTED_NAME.match(value) or _CODE_VALUE.match(value) or _LOWER_PATH.match(value) \
            or (len(norm) >= 2 and norm in _normalise_name(value)):
        return "label"  # ClassNames, obj.attr, key=value, paths, values that repeat the name
    return None


def _judge_assignment(name: str, value: str) -> tuple[str | None, str | None]:
    """(kind, None) for a credential, (None, skip reason) for a placeholder/label, (None, None) otherwise."""
    norm = _normalise_name(name)
    is_password = bool(_PASSWORD_NAME.search(norm))
    is_token = bool(_TOKEN_NAME.search(norm))
    if not (is_password or is_token):
        # `hmac_key = "..."`: a bare "key" name counts only for a long, random-looking value (no counters:
        # most `key = ...` lines are dictionary keys)
        if _KEY_NAME.search(norm) and not _NOT_A_VALUE_NAME.search(norm) and len(value) >= 20 \
                and entropy(value) >= 3.5 and _classes(value) >= 2 and not placeholder_reason(value) \
                and not _label_reason(value, norm, False):
            return "generic_secret", None
        return None, None
    if _NOT_A_VALUE_NAME.search(norm) or norm.endswith(("_key_id", "_keys")):
        return None, None
    if reason := placeholder_reason(value) or _label_reason(value, norm, is_password):
        return None, reason
    if is_password and len(value) >= 6 and (_classes(value) >= 2 or len(value) >= 10):
        return "password", None
    if len(value) >= 16 and entropy(value) >= 3.0 and _classes(value) >= 2 or len(value) >= 8 and _classes(value) >= 3:
        return ("aws_secret_key" if "aws" in norm else "generic_secret"), None
    return None, "low_entropy"


def find_secrets(text: str, kinds: frozenset[str] | None = None) -> tuple[list[SecretSpan], Counter]:
    """Non-overlapping secret spans in text order, and counters of skipped placeholders."""
    skipped: Counter = Counter()
    spans: list[SecretSpan] = []
    want = (lambda k: True) if kinds is None else kinds.__contains__
    for kind, pattern, group, ph in PROVIDER_PATTERNS:
        if not want(kind):
            continue
        for m in pattern.finditer(text):
            value = m.group(group)
            if kind == "private_key" and len(re.findall(r"[A-Za-z0-9+/=]", value)) < 200:
                skipped["secret_skipped_placeholder"] += 1
                continue
            if kind == "url_credentials":  # the position says it is a password: only placeholders are skipped
                if reason := placeholder_reason(value):
                    skipped[f"secret_skipped_{reason}"] += 1
                    continue
            elif kind == "bearer_token":
                k, reason = _judge_assignment("token", value)
                if reason or not k:
                    skipped[f"secret_skipped_{reason or 'low_entropy'}"] += 1
                    continue
            elif kind != "private_key" and placeholder_reason(value):
                skipped["secret_skipped_placeholder"] += 1
                continue
            spans.append(SecretSpan(m.start(group), m.end(group), kind, ph))
    if want("password") or want("generic_secret") or want("aws_secret_key"):
        for pattern in (_ASSIGN, _XML):
            for m in pattern.finditer(text):
                value = m.group("val") if m.group("val") is not None else m.group("bare")
                if m.group("val") is None and (m.group("op").strip() in ("", ",") or not _BARE_VALUE.search(value)
                                               or _DOTTED_NAME.match(value)):
                    continue  # unquoted values only in config syntax (KEY=value, key: value), never a type or name
                if (m.groupdict().get("op") or "").strip() == "," and not _CALL_BEFORE.search(text, max(0, m.start() - 40), m.start()):
                    continue  # ("NAME", "value") only as a call's arguments (setdefault, getenv), not in a list
                kind, reason = _judge_assignment(m.group("name"), value)
                if reason:
                    skipped[f"secret_skipped_{reason}"] += 1
                elif kind and want(kind):
                    start = m.start("val") if m.group("val") is not None else m.start("bare")
                    spans.append(SecretSpan(start, start + len(value), kind,
                                            "password" if kind == "password" else "key"))
    if want("email"):
        for start, end in email_spans(text):
            if is_test_email(text[start:end]):
                skipped["email_skipped_test_address"] += 1
            else:
                spans.append(SecretSpan(start, end, "email", "email"))
    taken: list[SecretSpan] = []
    for s in spans:  # earlier evidence wins overlaps: provider shapes, then assignments, then emails
        if all(s.end <= t.start or s.start >= t.end for t in taken):
            taken.append(s)
    return sorted(taken, key=lambda s: s.start), skipped


KINDS = tuple(k for k, *_ in PROVIDER_PATTERNS) + ("aws_secret_key", "password", "generic_secret", "email")


def redact_secrets(text: str, spans: list[SecretSpan], placeholders: dict[str, str] = PLACEHOLDERS) -> str:
    out, pos = [], 0
    for s in spans:
        out += [text[pos:s.start], placeholders[s.placeholder]]
        pos = s.end
    out.append(text[pos:])
    return "".join(out)
