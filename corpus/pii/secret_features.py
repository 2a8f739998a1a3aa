"""Features of a candidate value (secret_candidates.py) for the credential model: what the name says,
what the value looks like, how they are bound, and where (file type, comment, test call).

Each feature is a string; the model (secret_model.py) is a weight per string. The vocabulary is
closed on purpose: name words from a fixed list of credential and non-credential words (so the
model cannot learn a repository's own identifiers), value shape in buckets (length, entropy,
character classes, hex/base64/UUID/JWT, placeholder and template markers), and a few crosses of
name class x value shape, which a linear model needs to tell `password = "x7Gq2"` from
`title = "x7Gq2"`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache

from .secret_candidates import Candidate, folded_search, per_line

# name words (after splitting snake/camel/kebab/dotted names) that carry meaning for credentials
NAME_WORDS = frozenset("""
pass password passwd passphrase pwd pw passwort senha contrasena motdepasse wachtwoord haslo
secret secrets token tokens key keys apikey api private priv public pub access refresh session cookie
auth authorization authentication credential credentials cred creds login signin bearer basic digest oauth
nonce salt otp totp hotp seed mfa pin hmac sign signing signature cipher crypt crypto encrypt encryption
decrypt aes rsa jwt jwk jws jwe pem cert certificate client consumer app application master admin root
user username usr name email mail account id uid guid uuid hash hashed digest checksum sha md5 iv
url uri path file dir host port endpoint domain type kind mode format field label title message msg
text description hint placeholder error length len size min max count timeout ttl expiry expires
version ver enabled required confirm confirmation reset new old current old test mock fake dummy
example sample default value val var env header headers param params query form input data
webhook wx appid appsecret kty d k x y n e p q dp dq qi secure identified
encrypted wrapped fingerprint thumbprint crc hashes digests
""".split())
PASSWORD_WORDS = frozenset("pass password passwd passphrase pwd pw passwort senha contrasena motdepasse "
                           "wachtwoord haslo pin identified".split())
SECRET_WORDS = frozenset("secret secrets token tokens apikey credential credentials cred creds bearer "
                         "nonce salt otp totp hotp seed hmac signing signature cipher private priv appsecret secure".split())
KEY_WORDS = frozenset("key keys auth authorization oauth access refresh session cookie jwt jwk pem aes rsa".split())
NOT_VALUE_WORDS = frozenset("url uri path file dir host port endpoint type kind mode format field label title "
                            "message msg text description hint placeholder error length len size min max count "
                            "timeout ttl expiry expires version ver enabled required confirm confirmation reset "
                            "name username usr email mail id uid header param query input".split())
# a value derived from a secret or meant to be shared (a public key, a hash, an encrypted or wrapped
# key, a fingerprint) is not itself a credential: 287 of 288 such candidates in CredData's dev set are not
DERIVED_WORDS = frozenset("public pub hash hashed hashes digest digests checksum sha md5 crc encrypted wrapped "
                          "fingerprint thumbprint".split())
# of those, the ones that name a value shared by design or one-way (a public key, a hash), a feature of its own
# (CredData's dev set: 1 of 314 such candidates is a credential, against 10 of 488 named encrypted/wrapped).
# The detector skips both kinds before the model (secrets.skip_reason); the model still learns from them.
PUBLIC_WORDS = frozenset("public pub hash hashed hashes digest digests checksum sha md5 crc fingerprint "
                         "thumbprint".split())

_CAMEL = re.compile(r"([a-z0-9])([A-Z])|([A-Z]+)([A-Z][a-z])")
_SPLIT = re.compile(r"[^a-z]+")  # digits split words too: password2 -> password
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_B64 = re.compile(r"^[A-Za-z0-9+/]++={0,2}$")  # possessive: a failed match does not backtrack through the run
_B64URL = re.compile(r"^[A-Za-z0-9_\-]+$")
_UUID = re.compile(r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$")
_JWT = re.compile(r"^eyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-]*)?$")
_IDENT = re.compile(r"^(?:[a-z][a-z0-9]*(?:[_\-.][a-z0-9]+)+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[a-z]+(?:[A-Z][a-z0-9]+)+|"
                    r"[A-Z][a-z]+(?:[A-Z][a-z0-9]+)+|[A-Za-z_]\w*(?:\.\w+)+\(?\)?)$")
_TEMPLATE = re.compile(r"\$\{|\{\{|\{%|%\(\w+\)|%[sdv]\b|<%|\$\(|^\$\w|^%\w+%$|\{\w*\}|#\{|@\w+@|__\w+__|<[\w\-]+>")
# (?=[...]) holds the first letters of the alternatives: one class test per position before any alternative
# is tried (the scan is 1.2-1.6x faster; same matches)
_PLACEHOLDER = re.compile(r"(?=[cryesdpftmix*.lnuqhabgw])(?:change.?me|change.?this|replace|your|example|sample|dummy|placeholder|fake|mock|"
                          r"todo|fixme|redacted|insert|enter|here|xxx|\*\*\*|\.\.\.|lorem|notreal|test|secret|password|"
                          r"passwd|token|default|demo|foo|bar|baz|qwerty|admin|root|guest|letmein|hello|none|null|"
                          r"undefined|true|false|invalid|wrong|bad|incorrect|expired|empty|blank)", re.I)
_CODE_WORDS = re.compile(r"(?=[aestidmhcvbf])\b(?:assert\w*|expect|should|test|it|describe|mock|stub|hash\w*|encrypt\w*|decrypt\w*|"
                         r"compare|verify|validate|sign|bcrypt|md5|sha\d*|example|sample|default|fake|dummy)\b", re.I)
_has_placeholder_word, _has_code_word = folded_search(_PLACEHOLDER), folded_search(_CODE_WORDS)
_FILE_EXT = re.compile(r"\.\w{2,4}$")  # its "." is among the last 7 characters (6, or 7 before a final newline)
# every alternative of _TEMPLATE holds one of these: a value without any is searched no further
_TEMPLATE_CHARS = frozenset("${%<#@_")
_COMMENT = re.compile(r"^\s*(?:#|//|/\*|\*|<!--|--|;|%|rem\b)")

EXT_GROUP = {}
for _g, _exts in {
    "code": ".go .py .pyx .js .mjs .cjs .ts .tsx .jsx .java .kt .scala .rb .php .cs .c .h .cpp .cc .hpp .m .swift "
            ".rs .ex .exs .erl .groovy .gradle .pl .lua .dart .vb .fs .clj .r .jl .sh .bash .zsh .ps1 .bat .cmd "
            ".bats .erb .leex .eex .heex .vue .svelte .sql .stub",
    "config": ".yml .yaml .json .toml .ini .conf .cfg .config .properties .env .xml .plist .tf .tfvars .hcl "
              ".example .template .tpl .dist .j2 .storyboard .xib .axaml .xaml .csproj .gradle.kts .lock",
    "doc": ".md .rst .txt .html .htm .adoc .tex .org .markdown",
    "data": ".log .har .csv .tsv .key .pem .crt .cer .token .pub .p8",
}.items():
    for _e in _exts.split():
        EXT_GROUP[_e] = _g


_COMPOUND_WORDS = ("password", "passwd", "passphrase", "secret", "token", "apikey", "key", "pwd", "pass", "auth",
                   "nonce", "salt", "seed")
_COMPOUND = re.compile("(" + "|".join(_COMPOUND_WORDS) + ")$")  # all in NAME_WORDS


def _camel_break(m: re.Match) -> str:
    return (m.group(1) or m.group(3)) + "_" + (m.group(2) or m.group(4))


def _compound(w: str) -> str | None:
    """The credential word a glued compound ends with (ADMINPASSWORD -> password), for a word not in NAME_WORDS."""
    if w.endswith(_COMPOUND_WORDS):  # (a word is letters only: no "\n" for `$`)
        m = _COMPOUND.search(w)
        if len(w) > len(m.group()):
            return m.group()
    return None


@lru_cache(maxsize=65536)
def name_words(name: str) -> tuple[str, ...]:
    """Words of an identifier; a glued compound (ADMINPASSWORD, refreshtoken) also gives its credential word."""
    name = _CAMEL.sub(_camel_break, name.lstrip("$@-"))
    out = []
    for w in _SPLIT.split(name.lower()):
        if not w:
            continue
        out.append(w)
        if w not in NAME_WORDS and (c := _compound(w)):
            out.append(c)
    return tuple(out)


def _known_words(text: str) -> frozenset:
    """frozenset(name_words(text)) & NAME_WORDS, for a whole line: each distinct word once, and without
    name_words' cache (a line would only evict the names from it)."""
    words = set(_SPLIT.split(_CAMEL.sub(_camel_break, text.lstrip("$@-")).lower()))
    known = words & NAME_WORDS
    known.update(c for w in words - known if (c := _compound(w)))
    return frozenset(known)


_CLOGC = [0.0] + [c * math.log2(c) for c in range(1, 4097)]  # c*log2(c), summed in C by map() below


def entropy(value: str) -> float:
    """Shannon entropy in bits per character: log2(n) - sum(c*log2(c))/n over the character counts c."""
    n = len(value)
    if not n:
        return 0.0
    if n >= len(_CLOGC):
        return -sum(c / n * math.log2(c / n) for c in Counter(value).values())
    return max(0.0, math.log2(n) - sum(map(_CLOGC.__getitem__, Counter(value).values())) / n)


def _bucket(x: float, edges: tuple) -> int:
    for i, e in enumerate(edges):
        if x < e:
            return i
    return len(edges)


def name_class(words: list[str]) -> str:
    ws = set(words)
    if ws & PASSWORD_WORDS:
        return "password"
    if ws & SECRET_WORDS:
        return "secret"
    if ws & KEY_WORDS:
        return "key"
    if ws & NOT_VALUE_WORDS:
        return "other_named"
    return "none" if not words else "unknown"


_LOWER, _UPPER, _DIGIT = frozenset("abcdefghijklmnopqrstuvwxyz"), frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), \
    frozenset("0123456789")
_ALNUM = _LOWER | _UPPER | _DIGIT
_SPACE = frozenset(" \t\r\n\f\v")
_GLUE = frozenset("$.%(")
_DOLLAR_FIELDS = re.compile(r"\$[^$]+\$")
# base64 of the DER header of a public key (RSA 1024/2048/4096, EC P-256, Ed25519), as keys are pasted
DER_PUBLIC = ("MIGfMA0GCSqGSIb3DQEBAQUAA4GN", "MIIBIjANBgkqhkiG9w0BAQEFAAOC", "MIICIjANBgkqhkiG9w0BAQEFAAOC",
               "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE", "MCowBQYDK2VwAyEA")


def _periodic(v: str, distinct: int) -> bool:
    """The value repeats a unit of at most a quarter of its length (a unit holds all `distinct` characters)."""
    n = len(v)
    return any(n % k == 0 and v[:k] * (n // k) == v for k in range(max(1, distinct), n // 4 + 1))


_KEYWORDS = frozenset("range new nil await yield function lambda return this self typeof instanceof "
                      "async static const let var def".split())
_DOMAIN_USER = re.compile(r"^[A-Za-z][\w.\-]{0,62}\\{1,2}[A-Za-z][\w.\-]{0,62}$")


def _sequential(v: str) -> bool:
    """Half the value or more is in runs of 4+ consecutive characters (abcd, 6789, ZYXW)."""
    run, total = 1, 0
    for a, b in zip(v, v[1:]):
        if abs(ord(b) - ord(a)) == 1:
            run += 1
        else:
            total += run if run >= 4 else 0
            run = 1
    total += run if run >= 4 else 0
    return 2 * total >= len(v)


@lru_cache(maxsize=16384)
def value_shape(v: str) -> tuple[str, ...]:
    """Shape features of a value (cached: a file binds one value to many names, and many files share values)."""
    out = []
    n = len(v)
    chars = set(v)
    classes = (not chars.isdisjoint(_LOWER), not chars.isdisjoint(_UPPER), not chars.isdisjoint(_DIGIT),
               not chars <= _ALNUM)
    out.append("cls=" + "".join("LUDS"[i] for i, c in enumerate(classes) if c))
    out.append(f"len={_bucket(n, (4, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64, 100))}")
    h = entropy(v)
    out.append(f"ent={_bucket(h, (1.5, 2.0, 2.5, 3.0, 3.3, 3.6, 4.0, 4.4, 4.8, 5.2))}")
    if n >= 8:
        out.append(f"bits={_bucket(h * n, (24, 32, 48, 64, 96, 128, 192, 256))}")
    if n == 36 and _UUID.match(v):
        out.append("shape=uuid")
        if len(set(v.replace("-", ""))) <= 2:
            out.append("shape=uuid_zero")
        if classes[1]:
            out.append("shape=uuid_upper")  # Windows class ids and GUIDs are written in capitals
    elif v.startswith("eyJ") and _JWT.match(v):
        out.append("shape=jwt")
    elif n >= 8 and _HEX.match(v) and classes[2] and (classes[0] or classes[1]):
        out.append("shape=hex")
    elif n >= 12 and _B64.match(v) and sum(classes[:3]) >= 2:
        out.append("shape=b64")
    elif n >= 12 and _B64URL.match(v) and sum(classes[:3]) >= 2:
        out.append("shape=b64url")
    if v.isdigit():
        out.append("digits")
    if v.isalpha() and v.islower():
        out.append("lower_alpha")
    if not chars.isdisjoint(_SPACE):
        out.append("space")
    if not v.isascii():
        out.append("non_ascii")
    if not chars.isdisjoint(_TEMPLATE_CHARS) and _TEMPLATE.search(v):
        out.append("template")
    if _has_placeholder_word(v):
        out.append("placeholder_word")
    if _IDENT.match(v):
        out.append("identifier")
    if "://" in v or v.startswith(("/", "./", "../", "~/", "http")) or ("." in v[-7:] and _FILE_EXT.search(v)):
        out.append("path_or_url")
    if "(" in v or ")" in v:
        out.append("paren")
    if len(chars) <= 2 or len(set(v.lower())) <= 2:
        out.append("repeated")
    if v.startswith(("-----BEGIN", "MII")):
        out.append("pem")
    if v.startswith(DER_PUBLIC):
        out.append("der_public")  # an X.509 SubjectPublicKeyInfo: a public key, shared by design
    if n >= 16 and len(chars) <= n // 4 and _periodic(v, len(chars)):
        out.append("periodic")  # deadbeefdeadbeef..., abcabcabc...: typed, not generated
    if v in _KEYWORDS:
        out.append("keyword")  # `for user, password := range users`: the language's own word, not a value
    if "\\" in v and _DOMAIN_USER.match(v):
        out.append("domain_user")  # DOMAIN\\user: a Windows account name beside its password
    if n >= 6 and _sequential(v):
        out.append("sequential")  # an alphabet or a counting run (abcdef..., 0123456789): typed, not generated
    if "\\n" in v:
        out.append("escaped_newline")
    if "$" in v and _DOLLAR_FIELDS.search(v):
        out.append("dollar_fields")  # crypt(3)/PHC hash strings: $6$rounds=...$salt$hash, $argon2id$v=19$...
    return tuple(out)


def clear_caches() -> None:
    """Empty the name and value caches (a benchmark's repeat starts cold, like a fresh process)."""
    for cached in (name_words, _name_part, _line_words, _shape_part, value_shape, _line_features):
        cached.cache_clear()


def line_features(line: str) -> tuple[frozenset, list[str]]:
    """What a line says around its candidates (computed once per line): its credential words, comment, test code."""
    lw, flags = per_line(_line_features, line)
    return lw, list(flags)


@lru_cache(maxsize=4096)  # a fifth of the lines read repeat one read before (imports, headers, settings)
def _line_features(line: str) -> tuple[frozenset, tuple[str, ...]]:
    lw = _known_words(line[:300])
    out = []
    if _COMMENT.match(line):
        out.append("comment")
    if _has_code_word(line):
        out.append("code_word")
    return lw, tuple(out)


@lru_cache(maxsize=16384)
def _name_part(name: str, op: str, quoted: bool, group: str) -> tuple[str, tuple[str, ...], tuple[str, ...], frozenset]:
    """(name class, name words, the features that depend only on name, binding and file type, the known name
    words): cached, since a file binds many values to few names."""
    words = name_words(name)
    cls = name_class(words)
    known = [w for w in words if w in NAME_WORDS]
    f = ["bias", f"op={op}", f"q={quoted}", f"nc={cls}", f"ext={group}"]
    f += [f"nw={w}" for w in known]
    if known:
        f.append(f"last={known[-1]}" if words[-1] == known[-1] else "last=other")
    if not DERIVED_WORDS.isdisjoint(words):
        f += ["derived", f"derived&{cls}"]
        if not PUBLIC_WORDS.isdisjoint(words):
            f += ["public_or_hash", f"public_or_hash&{cls}"]
    if 0 < len(name.strip("$@-_")) <= 2 and not op.startswith("shape") and op not in ("url", "auth"):
        f.append("short_name")  # `p=8$...` inside a hash string, `k: v` in a table: rarely a credential's name
    return cls, words, tuple(f), frozenset(known)


@lru_cache(maxsize=4096)
def _line_words(lw: frozenset, known: frozenset) -> tuple[str, ...]:
    """The line's credential words that the name does not hold (cached: few distinct pairs)."""
    return tuple(f"lw={w}" for w in sorted(lw) if w not in known)


@lru_cache(maxsize=16384)
def _shape_part(cls: str, shape: tuple[str, ...], group: str, op: str, quoted: bool) -> tuple[str, ...]:
    """The shape features and their crosses with the name class, binding and file type (cached: few
    distinct combinations)."""
    cl, size, ent = shape[0], shape[1], shape[2]  # value_shape's first three: classes, length, entropy
    f = list(shape)
    f += [f"{cls}&{size}", f"{cls}&{cl}", f"{cls}&{ent}", f"{cls}&q={quoted}", f"{cls}&op={op}", f"{group}&{cls}"]
    f += [f"{cls}&{s}" for s in shape[3:]]
    f += [f"{cls}&{group}&op={op}", f"{cls}&{size}&{cl}", f"op={op}&q={quoted}&{cl}", f"{group}&{shape[-1]}"]
    return tuple(f)


def features(c: Candidate, text: str, line_info: tuple[frozenset, list[str]], ext: str, n_in_line: int,
             n_values: int = 1, repeated: bool = False) -> list[str]:
    """Features of candidate c; `line_info` from line_features (plus secret_context's neighbour flags),
    `n_in_line` candidates on its line, `n_values` distinct values bound to its name in the file; `repeated`:
    the caller knows the value is also elsewhere in the text (else the text is searched for it)."""
    v = text[c.start:c.end]
    op = c.op
    group = EXT_GROUP.get(ext.lower(), "other")
    cls, words, base, known = _name_part(c.name, op, bool(c.quote), group)
    shape = value_shape(v)
    size = shape[1]
    f = list(base)
    f += _shape_part(cls, shape, group, op, bool(c.quote))
    lw, flags = line_info
    f += _line_words(lw, known)
    if flags:  # (most lines have none: no list built for them)
        f += flags
        f += [f"{fl}&{cls}" for fl in flags]  # an asserted or hashed value under a credential name is a fixture
    if "digits" in shape:  # a six-digit one-time code or a PIN differs from a long numeric secret
        f += [f"digits&{size}", f"{cls}&digits&{size}"]
    if "derived" in base:  # how a derived value (a hash, a public key) looks: a hex digest, a DER key
        f += [f"derived&{size}"] + [f"derived&{s}" for s in shape[3:]]
    if c.name:  # one name bound to many values in one file: a table of fixtures or of users
        f.append(f"{cls}&values={_bucket(n_values, (2, 3, 6))}")
    if words and "".join(words) in v.lower().replace("_", "").replace("-", ""):
        f.append("value_has_name")
    f.append(f"n_in_line={min(n_in_line, 5)}")
    # a bare value inside a string literal is configuration text held by code ("CONNECT {pass: x}"), not a variable
    start_in_line = c.start - (text.rfind("\n", 0, c.start) + 1)
    before = text[c.start - start_in_line:c.start]
    in_string = (before.count('"') - before.count('\\"')) % 2 == 1 or before.count("`") % 2 == 1
    f.append(f"in_string={in_string}&q={bool(c.quote)}")
    if flags:
        f += [f"{fl}&in_string={in_string}" for fl in flags if fl in ("assert_line", "near_assert")]
    if not c.quote:  # an unquoted value cut out of a longer run ("...$salt$hash", "67f4...(...)...")
        after = text[c.end:c.end + 1]
        if (before[-1:] and before[-1] in _GLUE) or (after and after in _GLUE):
            f.append("glued")
    elif before.rfind("<") > before.rfind(">"):
        f.append("in_tag")  # an attribute of an XML/HTML element: <add key="name" value="...">
    if len(v) >= 3 and (repeated or text.find(v) < c.start or text.find(v, c.end) >= 0):
        f.append(f"repeats&q={bool(c.quote)}")  # a variable used again, or a fixture value checked later
    return f
