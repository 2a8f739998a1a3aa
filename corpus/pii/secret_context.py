"""Context features of a credential candidate (secret_features.py): what the lines around it and the
rest of the file say, beyond the candidate's own line.

Issue 39's remaining false hits are values that look like credentials and sit where credentials are
not kept: expected outputs of tests (`assertEquals("OAuth oauth_nonce=\"...\"", header)`, a table of
six-digit `token:` fixtures next to `expect(...)`), commands shown in security notes
(`PS> $pass = ConvertTo-SecureString '...'`), values bound many times to one name in one file. Each
signal here is general (a word list or a line shape, never a file or repository); the model learns
how much each one counts, by held-out repository (evals/data/pii_secret_train.py).

Computed once per line that has a candidate (the caller caches them), and once per file for the
name counts, so files and lines without a credential word cost nothing more.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from functools import lru_cache

from .secret_candidates import CACHED_LINE, folded_search, per_line

# an assertion or an expectation: the values on or near such a line are expected outputs (test vectors)
_ASSERT = re.compile(r"(?=[aestvdi])\b(?:assert\w*|expect\w*|should\w*|to(?:be|equal)\w*|deep_?equal\w*|"
                     r"verify\w*|test\w*|(?:it|describe)(?=\s*\())\b", re.I)
# a hash or digest being computed or checked on the line: its operands are hashes, not stored secrets
_HASH = re.compile(r"(?=[hdsmbacpk])(?:hash\w*|digest|sha\d*|md5|bcrypt|argon2\w*|scrypt|pbkdf2\w*|crypt\b|"
                   r"checksum|compare\w*|kdf)", re.I)
# a command shown with its shell prompt (docs, security notes): `$ cmd`, `PS> cmd`, `C:\> cmd`, `user@host$ cmd`
_has_assert_word, _has_hash_word = folded_search(_ASSERT), folded_search(_HASH)
_PROMPT = re.compile(r"^\s*(?:\$\s|PS[ >]|[A-Z]:\\[^>\n]{0,80}>|>>>\s|[\w.\-]+@[\w.\-]+(?::[^$#\n]{0,80})?[$#]\s)")
_FENCE = re.compile(r"^\s*(?:```|~~~)", re.M)
NEAR = 3  # lines either side that count as the candidate's neighbourhood


def fence_starts(text: str) -> list[int]:
    """Offsets of the fence lines of a Markdown file (``` or ~~~), in order."""
    return [m.start() for m in _FENCE.finditer(text)]


# the end of a line that may hold an `it`/`describe` whose `(` is on a later line (the one match of _ASSERT
# that can reach past its own line); tested on the line's last 8 characters once trailing space is stripped
_CALL_AT_END = re.compile(r"(?:it|describe)$", re.I)


@lru_cache(maxsize=8192)
def _assert_kind(line: str) -> int:
    """2: _ASSERT finds a match within this one line; 1: it does not, but the line ends with an `it`/`describe`;
    0: neither (cached: the same lines are neighbours of many values)."""
    if _has_assert_word(line):
        return 2
    return 1 if _CALL_AT_END.search(line.rstrip()[-8:]) else 0


def _assert_between(text: str, lo: int, hi: int) -> bool:
    """_ASSERT.search(text, lo, hi) is not None, for lo and hi at line boundaries, from each line's cached
    result: a match within one line is a match in the span, and a span without one has a match only if an
    `it`/`describe` at a line's end is followed by its `(` on a later line, where the span is searched whole."""
    lines = text[lo:hi].split("\n")
    # map() over the cached function when every line fits the cache (almost always): no Python frame per line
    kind = max(map(_assert_kind, lines)) if max(map(len, lines)) <= CACHED_LINE else \
        max(per_line(_assert_kind, x) for x in lines)
    return kind == 2 or (kind == 1 and _ASSERT.search(text, lo, hi) is not None)


def neighbour_flags(text: str, line_start: int, line_end: int, line: str, group: str,
                    fences: list[int] | None) -> list[str]:
    """Flags of the line at text[line_start:line_end] from itself and its NEAR neighbours on each side."""
    out = []
    if per_line(_assert_kind, line) == 2:
        out.append("assert_line")
    else:
        lo = line_start
        for _ in range(NEAR):
            lo = text.rfind("\n", 0, max(0, lo - 1)) + 1
        hi = line_end
        for _ in range(NEAR):
            nxt = text.find("\n", hi + 1)
            hi = len(text) if nxt < 0 else nxt
        if _assert_between(text, lo, line_start) or _assert_between(text, min(line_end, len(text)), hi):
            out.append("near_assert")
    if _has_hash_word(line):
        out.append("hash_line")
    if _PROMPT.match(line):
        out.append("prompt")
    if group == "doc" and fences is not None:
        out.append("doc_fenced" if bisect.bisect_right(fences, line_start) % 2 else "doc_prose")
    return out


def clear_caches() -> None:
    """Empty the line cache (a benchmark's repeat starts cold, like a fresh process)."""
    _assert_kind.cache_clear()


def values_per_name(text: str, cands) -> dict[str, int]:
    """How many distinct values each name is bound to in the file (a table of fixtures binds many)."""
    seen: dict[str, set] = defaultdict(set)
    for c in cands:
        if c.name:
            seen[c.name].add(text[c.start:c.end])
    return {n: len(v) for n, v in seen.items()}


def value_extents(text: str, cands) -> dict[str, tuple[int, int]]:
    """The lowest and the highest start of each candidate value in the file: a value that another candidate
    holds where it does not overlap this one repeats in the file, known without searching the text for it."""
    out: dict[str, tuple[int, int]] = {}
    for c in cands:
        v = text[c.start:c.end]
        lo_hi = out.get(v)
        out[v] = (c.start, c.start) if lo_hi is None else (min(lo_hi[0], c.start), max(lo_hi[1], c.start))
    return out
