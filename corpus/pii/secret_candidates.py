"""Candidate values for the credential model (secret_model.py): every value in a source line that
code, configs, shells and docs use to hold a credential, with the name it is bound to and how.

Only lines that can hold one are read: a line with a credential word (pass, pwd, secret, token, key,
auth, nonce, salt, otp, seed, cred, session, cookie, login, ...), a `scheme://user:pass@` URL, an
`Authorization` scheme, or a long random-looking token. In such a line a candidate is:

- a quoted string ("...", '...', `...`) or a bare value after an operator (`=`, `:`, `:=`, `=>`, `->`),
  bound to the identifier just before the operator (`db_password = "..."`, `"apiKey": "..."`,
  `PASS=...`, `&password=...` in a query, `-e MYSQL_ROOT_PASSWORD=...`, `password: ...` in YAML);
- a value after a command-line flag or keyword (`--password x`, `-p x`, `identified by 'x'`,
  `--user admin:x`, `set SMBPass x`), bound to the flag;
- the password of a `scheme://user:password@host` URL; the credentials of a `Basic`/`Bearer`/`Token`
  scheme; an XML element's text (`<password>x</password>`);
- a token with a credential's shape anywhere (JWT, NKEY seed, long hex/base64/base62, UUID).

Each candidate keeps its character span in the text, its 1-based line, the name (possibly empty),
the operator kind and the quote, for the features. No decision is made here.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

MAX_LINE = 4000  # longer lines (minified code, data blobs) are read in windows around credential words
MAX_WINDOWS = 2000  # at most this many windows per line (bounded work on pathological lines)

# A line worth reading: credential words (lower-cased text), URL credentials, auth schemes, long tokens.
# One compiled pattern whose alternatives all start with a literal letter (a word boundary before one is
# checked after it, `p(?<!\wp)` for `\bp`): the regex engine then skips, in C, every character that starts
# none of them, instead of entering the pattern at each position (1.8x faster on CredData's files than the
# former lookahead on the first letters, which kept the engine from that skip; same matches).
_LINE_CUE = re.compile(
    r"p(?:ass|wd)|s(?:e(?:cret|ssion|ed)|alt|ignature)|token|key|auth(?!or)|nonce|otp|"
    r"c(?:red|ookie|ipher|rypt|lient_?id)|login|hmac|b(?:earer|asic )|identified by|"
    r"://[^\s/:@]{0,64}:[^\s/@]{1,128}@|app_?id|-(?:u |-user)|p(?<!\wp)(?:w|in)\b|_pw\b|a(?<!\wa)pi")
_LONG_TOKEN = re.compile(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{20,}")  # a run tried from its start only

_NAME = r"[A-Za-z_$@][\w.\-$@\[\]]{0,80}"
_QUOTED = re.compile(r"""(?P<q>["'`])(?P<val>(?:\\.|(?!(?P=q))[^\\\n]){1,600})(?P=q)""")
# each quote kind on its own too: '{"token": "x"}' holds double-quoted values inside a single-quoted string
_QUOTED_ONE = {q: re.compile(q + r"(?P<val>(?:\\.|[^\\\n" + q + r"]){1,600})" + q) for q in "\"'"}
# "key": "value" and "key": ["v1", "v2"] found by their shape, so a line that starts inside a string
# (a wrapped YAML or log line) does not pair its quotes the wrong way round
_JSON_PAIR = re.compile(r'"(?P<name>[\w.\-]{1,60})"\s*:\s*"(?P<val>[^"\\\n]{1,300})"')
_JSON_LIST = re.compile(r'"(?P<name>[\w.\-]{1,60})"\s*:\s*\[(?P<vals>\s*"[^"\\\n]{1,300}"(?:\s*,\s*"[^"\\\n]{1,300}"){0,20})\s*\]')
_ESC_QUOTED = re.compile(r'\\"(?P<val>[^"\\\n]{1,300})\\"')  # "{\"pass\":\"x\"}": JSON inside a string
# the name starts where an identifier starts and is read possessively (`{0,80}+`): without both, the
# scan retries every position inside every identifier and backtracks through it (10x slower)
_BARE = re.compile(r"(?<![A-Za-z_$@])(?P<name>" + _NAME + r"+)(?P<nq>[\"']?)[ \t]*(?P<op>:=|=>|=|:)[ \t]*(?P<val>[^\s\"'`,;&<>(){}\[\]|]{1,600})")
_FLAG = re.compile(r"(?:^|\s)(?=[-isupac#\\])(?P<name>--?[A-Za-z][\w\-]{0,30}|identified\s+by|set\s+\w+|PASS|USER|AUTH|ConvertTo-SecureString|\#define\s+\w+|\\set\s+\w+|PASSWORD|IDENTIFIED\s+(?:WITH\s+\w+\s+)?BY)"
                   r"[ \t=]+(?P<q>[\"']?)(?P<val>[^\s\"']{1,300})(?P=q)", re.I)
# a line can hold a _FLAG match only if it holds "-", "identified", "set", "pass", "user", "auth" or "#define" in
# lower case (tested before the search)
# a URL's "password" that is a port followed by #, ? or \ (`http://host:80#@evil/`, a parser-confusion trick in
# security notes) is not a password; shared with secrets.py's url_credentials pattern
NOT_A_PORT = r"(?!\d{1,5}[#?\\])"
_URL = re.compile(r"\b[a-z][a-z0-9+.\-]{1,20}://(?P<user>[^\s:/@\"'<>]{0,64}):(?P<val>" + NOT_A_PORT + r"[^\s@/\"'<>]{1,128})@"
                  r"[A-Za-z0-9.\-\[%${<]", re.I)
_AUTH = re.compile(r"(?=[btdoaks])\b(?P<name>Basic|Bearer|Token|Digest|OAuth|ApiKey|Key|SSWS)\s+(?P<val>[A-Za-z0-9+/=._\-~:]{6,})", re.I)
# an ASCII line where _AUTH matches holds one of its scheme names in lower case (key, token, basic, bearer,
# digest, oauth, ssws: tested before the search); with re.I a non-ASCII letter can match one (the long s
# matches "s"), so other lines are always searched
_XML = re.compile(r"<(?P<name>[A-Za-z_][\w\-.:]{0,60})(?:\s[^<>]*)?>(?P<val>[^<>\n]{1,400})</(?P=name)>")
_SHAPE = re.compile(
    r"(?=[A-Za-z0-9+/_\-])(?:(?P<jwt>eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{2,}(?:\.[A-Za-z0-9_\-]*)?)"
    r"|(?P<nkey>\bS[A-Z][A-Z2-7]{54,58}\b)"
    r"|(?P<uuid>\b[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\b)"
    r"|(?P<token>(?<![\w+/=\-])[A-Za-z0-9+/_\-]{20,}={0,2}(?![\w+/=\-])))")


class Candidate(NamedTuple):  # a named tuple, not a frozen dataclass: 10x cheaper to build, and files have thousands
    start: int  # character offsets of the value in the text
    end: int
    line: int  # 1-based
    name: str  # the identifier, flag or scheme it is bound to ("" when none)
    op: str  # "=", ":", "=>", ",", "(", "flag", "url", "auth", "xml", "shape:<kind>", "none"
    quote: str  # '"', "'", "`" or ""

    def value(self, text: str) -> str:
        return text[self.start:self.end]


def folded_search(pattern: re.Pattern):
    """A test equal to `pattern.search(s) is not None`, for a case-insensitive pattern written in lower case,
    2-4x faster on ASCII text: an ASCII string is lowered and searched by the same pattern without re.I
    (which folds the case of every character it compares). Other strings go to the pattern itself: re.I
    also matches some non-ASCII letters to ASCII ones (the long s to "s", the Kelvin sign to "k")."""
    if not pattern.flags & re.I or re.search(r"(?<!\\)[A-Z]", pattern.pattern):
        raise ValueError(f"not a lower-case re.I pattern: {pattern.pattern[:60]}")
    plain = re.compile(pattern.pattern, pattern.flags & ~re.I)

    def found(s: str) -> bool:
        return (plain.search(s.lower()) if s.isascii() else pattern.search(s)) is not None
    return found


# the binding read backwards from the value's opening quote: [call(] op [quote] name
_BOUND_REV = re.compile(r"\\?@?\s*(?:\(\w+(?:\s+wen)?|[rbuf](?=[\s=:,(]))?\s*"
                        r"(?P<op>=:|>=|>-|===|==!|==|=!|=\|\||=\?\?|=(?:\s*[\w&<>\[\].|?*]{1,40}\s*:(?!:))?|:|,|\()\s*"
                        r"\]?(?P<nq>[\"']?)\\?(?P<name>[\w.\-$@\[\]]{1,80})")
_CALLEE_REV = re.compile(r"[^()]{0,80}?\((?P<callee>[\w.\-]{1,60})")
_CRED_WORD = re.compile(r"pass|pwd|pw\b|secret|token|key|auth|cred|nonce|salt|otp|seed|session|cookie|login|sign|"
                        r"hmac|bearer|basic|private|cipher|crypt|pin\b|api|appid|app_id|client|access|identified|user|secure",
                        re.I)
_has_cred_word = folded_search(_CRED_WORD)


# a value inside a list bound to a name: "tokens": ["a", "b"]
_LIST_REV = re.compile(r"\s*(?:,\s*(?:\"[^\"\n]{0,100}\"|'[^'\n]{0,100}')\s*){0,10}\[\s*(?P<op>=:|=|:)\s*"
                       r"\]?(?P<nq>[\"']?)\\?(?P<name>[\w.\-$@]{1,80})")


def _binding(line: str, at: int) -> tuple[str, str]:
    """(name, op) of the identifier bound to a value that starts at `at` (the opening quote)."""
    before = line[max(0, at - 400):at][::-1]
    # _LIST_REV needs a "," or "[" first after whitespace (str.lstrip strips what \s matches)
    m = _LIST_REV.match(before) if "[" in before and before.lstrip()[:1] in (",", "[") else None
    if m is not None:
        name = m.group("name")[::-1].lstrip("0123456789.-")
        if name:
            return name, "list"
    m = _BOUND_REV.match(before)
    if m is None:
        return "", "none"
    name = m.group("name")[::-1].lstrip("0123456789.-").rstrip(".[]")
    op = m.group("op")[::-1]
    op = "=" if op.endswith("=") and ":" in op else op  # name: Type = value
    if op in (",", "("):  # a call's argument: the callee says what it is (GitCredential("alice", "x"))
        callee = _CALLEE_REV.match(line[max(0, at - 160):at][::-1]) if op == "," else None
        callee_name = callee.group("callee")[::-1] if callee else ""
        name = f"{callee_name}.{name}" if callee_name else name
    return (name, op) if name else ("", "none")


_HEXISH = re.compile(r"[0-9a-f]+|[0-9A-F]+")
_LOWER, _UPPER, _DIGITS = frozenset("abcdefghijklmnopqrstuvwxyz"), frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), \
    frozenset("0123456789")
_LIST_ITEM = re.compile(r'"([^"]+)"')


def _classes(value: str) -> tuple[bool, bool, bool]:
    chars = set(value)
    return not chars.isdisjoint(_LOWER), not chars.isdisjoint(_UPPER), not chars.isdisjoint(_DIGITS)


@lru_cache(maxsize=16384)
def cred_name(name: str) -> bool:
    """The name holds a credential word (cached: a file binds many values to few names)."""
    return _has_cred_word(name)


def worth_scoring(value: str, name: str, op: str) -> bool:
    """The cheap gate before features: a value a credential can be (no spaces, at most two non-ASCII
    characters, 3+ characters) bound to a credential-like name or flag, or in a credential position or
    shape; an unnamed long token only when it looks random (most are identifiers and paths)."""
    if len(value) < 3 or (" " in value and op != "auth") or "\t" in value:
        return False
    if not value.isascii() and len(value) - sum(map(str.isascii, value)) > 2:  # (map: no Python frame per character)
        return False  # text in another script; one or two non-ASCII characters can be in a password
    if op == "shape:token":
        lower, upper, digit = _classes(value)
        return (lower and upper and digit and sum(map(str.isdigit, value)) >= 2) or \
            (len(value) >= 32 and _HEXISH.fullmatch(value) is not None)
    if op in ("url", "auth", "xml") or op.startswith("shape:"):
        return True
    if cred_name(name):
        return True
    return len(value) >= 16 and sum(_classes(value)) >= 2
def _windows(line: str) -> list[tuple[int, int]]:
    if len(line) <= MAX_LINE:
        return [(0, len(line))]
    out: list[tuple[int, int]] = []
    for m in _LINE_CUE.finditer(line.lower()):
        s, e = max(0, m.start() - 200), min(len(line), m.end() + 400)
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out[:MAX_WINDOWS]


def line_candidates(line: str, offset: int, lineno: int, shapes_only: bool = False,
                    has_token: bool | None = None) -> list[Candidate]:
    """Candidates of one line (without its newline) that starts at `offset` in the text; with
    `shapes_only` (a line with a long token but no credential word) only the tokens with a shape.
    `has_token`: whether the line holds a run of 20+ token characters, when the caller knows (None: search)."""
    if has_token is None:
        has_token = _LONG_TOKEN.search(line) is not None
    found = per_line(_line_values, line, shapes_only, has_token)
    return [Candidate(offset + s, offset + e, lineno, name, op, quote) for s, e, name, op, quote in found]


CACHED_LINE = 1000  # lines up to this long have their values cached: a fifth of the lines read repeat a line
# read before (license headers, imports, the same setting in every environment's config)


def per_line(cached, line: str, *args):
    """`cached(line, *args)` (an lru_cache'd function of one line) through its cache for lines up to
    CACHED_LINE characters, and uncached for longer ones (rare, and they would only evict the common ones)."""
    return cached(line, *args) if len(line) <= CACHED_LINE else cached.__wrapped__(line, *args)


@lru_cache(maxsize=4096)
def _line_values(line: str, shapes_only: bool, has_token: bool) -> tuple[tuple[int, int, str, str, str], ...]:
    """(start, end, name, op, quote) of each candidate value of a line, offsets within the line; `has_token`:
    the line holds a _LONG_TOKEN match (a function of the line, so the cache stays right)."""
    out: dict[tuple[int, int], tuple[int, int, str, str, str]] = {}

    def add(s, e, name, op, quote):
        if e > s and (s, e) not in out and worth_scoring(line[s:e], name, op):
            out[(s, e)] = (s, e, name, op, quote)

    for ws, we in ((0, len(line)),) if len(line) <= MAX_LINE else _windows(line):
        part = line[ws:we]
        if shapes_only:
            for m in _SHAPE.finditer(part):
                name, op = _binding(part, m.start() - (m.start() > 0 and part[m.start() - 1] in "\"'`"))
                add(ws + m.start(), ws + m.end(), name, f"shape:{m.lastgroup}" if op == "none" else op, "")
            continue
        # each pattern runs only where its literal part is (the cheap `in` tests keep long files fast)
        if "://" in part:
            for m in _URL.finditer(part):
                add(ws + m.start("val"), ws + m.end("val"), m.group("user") or "url", "url", "")
        lowered = part.lower()
        if " " in part and (not part.isascii() or "key" in lowered or "token" in lowered or "basic" in lowered or
                            "bearer" in lowered or "digest" in lowered or "oauth" in lowered or "ssws" in lowered):
            for m in _AUTH.finditer(part):
                add(ws + m.start("val"), ws + m.end("val"), m.group("name").lower(), "auth", "")
        if "</" in part:
            for m in _XML.finditer(part):
                add(ws + m.start("val"), ws + m.end("val"), m.group("name"), "xml", "")
        for m in (_QUOTED.finditer(part) if '"' in part or "'" in part or "`" in part else ()):
            name, op = _binding(part, m.start())
            add(ws + m.start("val"), ws + m.end("val"), name, op, m.group("q"))
        if "'" in part and '"' in part:
            for q, pattern in _QUOTED_ONE.items():
                for m in pattern.finditer(part):
                    name, op = _binding(part, m.start())
                    add(ws + m.start("val"), ws + m.end("val"), name, op, q)
        if '":' in part:
            for m in _JSON_PAIR.finditer(part):
                add(ws + m.start("val"), ws + m.end("val"), m.group("name"), ":", '"')
            for m in _JSON_LIST.finditer(part):
                for v in _LIST_ITEM.finditer(m.group("vals")):
                    add(ws + m.start("vals") + v.start(1), ws + m.start("vals") + v.end(1), m.group("name"), "list", '"')
        if '\\"' in part:
            for m in _ESC_QUOTED.finditer(part):
                name, op = _binding(part, m.start() + 1)
                add(ws + m.start("val"), ws + m.end("val"), name, op, '"')
        for m in (_BARE.finditer(part) if "=" in part or ":" in part else ()):
            val = m.group("val").rstrip(".")
            if val:
                add(ws + m.start("val"), ws + m.start("val") + len(val), m.group("name").rstrip(".[]"),
                    m.group("op"), "")
        for m in (_FLAG.finditer(part) if "-" in lowered or "pass" in lowered or "user" in lowered or "set" in lowered
                  or "auth" in lowered or "identified" in lowered or "#define" in lowered else ()):
            val, start = m.group("val"), ws + m.start("val")
            if m.group("name").lower() in ("-u", "--user") and ":" in val:  # curl --user admin:password
                start += val.index(":") + 1
            add(start, ws + m.end("val"), m.group("name"), "flag", m.group("q"))
        # a window of a long line is searched itself (its first character may be inside a run)
        if has_token if we == len(line) and ws == 0 else _LONG_TOKEN.search(part):
            shapes = _SHAPE.finditer(part)
        else:
            shapes = ()
        for m in shapes:
            kind = m.lastgroup
            name, op = _binding(part, m.start() - (m.start() > 0 and part[m.start() - 1] in "\"'`"))
            add(ws + m.start(), ws + m.end(), name, f"shape:{kind}" if op == "none" else op, "")
    return tuple(out.values())


def clear_caches() -> None:
    """Empty the name and line caches (a benchmark's repeat starts cold, like a fresh process)."""
    cred_name.cache_clear()
    _line_values.cache_clear()


# an ASCII text mapped to one byte per character: "t" for a token character, " " for any other
_TOKEN_CLASS = bytes(ord("t") if chr(i).isascii() and (chr(i).isalnum() or chr(i) in "+/_-") else ord(" ")
                     for i in range(256))
_TOKEN_RUN = b"t" * 20


def long_token_starts(text: str) -> list[int]:
    """Where each run of 20+ token characters starts (the matches of _LONG_TOKEN), in order. The runs are
    found with bytes.find over the text mapped to one token / other byte per character (the first 20 token
    bytes in a row start a run, since the byte before them is not one), 5x faster than the regex."""
    # "replace" writes one "?" (not a token byte) for each non-ASCII character, so offsets stay character offsets
    mapped = text.encode("ascii", "replace").translate(_TOKEN_CLASS)
    out, at = [], mapped.find(_TOKEN_RUN)
    while at >= 0:
        out.append(at)
        end = mapped.find(b" ", at)
        at = -1 if end < 0 else mapped.find(_TOKEN_RUN, end)
    return out


def candidates(text: str) -> list[Candidate]:
    """Candidates of every line that can hold a credential, in text order."""
    out: list[Candidate] = []
    lower = text.lower()
    none = len(text) + 1  # "no further match"
    pos, counted, lineno = 0, 0, 1
    cue = (m.start() if (m := _LINE_CUE.search(lower)) is not None else none)
    tokens = long_token_starts(text)
    k = 0
    token = tokens[0] if tokens else none
    while cue < none or token < none:
        at = min(cue, token)
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        lineno += text.count("\n", counted, start)
        counted = start
        # line_candidates inlined (a Python frame per selected line saved); the long-token runs are known (tokens):
        # the next one from pos on is in this line or after it
        line = text[start:end]
        found = _line_values(line, cue >= end, token < end) if end - start <= CACHED_LINE else \
            _line_values.__wrapped__(line, cue >= end, token < end)
        if found:
            out += [Candidate(start + s, start + e, lineno, name, op, quote) for s, e, name, op, quote in found]
        pos = end + 1  # one search per selected line, from the next line on
        if cue < pos:
            cue = (m.start() if (m := _LINE_CUE.search(lower, pos)) is not None else none)
        while token < pos:  # a run never crosses a line start, so the next one from pos on is the next in the list
            k += 1
            token = tokens[k] if k < len(tokens) else none
    return out
