"""Match one text against the license index: whole-file Dice, then phrases, then SPDX tags.

- Dice (2|A∩B| / (|A|+|B|) over distinct words, as licensee does) recognises a license file even
  when reflowed, Markdown-formatted or with another copyright holder; a modified license (a
  changed clause) falls under the threshold and stays unknown rather than passing as the original.
- Phrases (ScanCode notices/references/tags) find "Licensed under the Apache License, Version
  2.0" in a README or a file header.
- `SPDX-License-Identifier:` tags are read as expressions directly.
- Texts inside a longer file (`locate_texts`): a statement before the license text, two or three
  texts one after the other, notices appended. Each text is found as a run of paragraphs whose
  words a candidate's text covers, grown while its Dice score rises, and kept at Dice >= DICE_MIN,
  so a modified text still does not pass as the original.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .license_index import KEY_WORDS, LicenseIndex, load_index
from .license_text import _EQUIVALENT, normalize, words

DICE_MIN = 0.95  # below this a whole-file match is not trusted; renamed+modified texts also fail the title check
COVER_MIN = 0.97  # a file that contains all of a license text plus other text (appended notices)
_SPDX_TAG = re.compile(r"SPDX-License-Identifier:\s*([A-Za-z0-9.+\-_ ()]+?)\s*(?:\*/|-->|$)", re.MULTILINE)


@dataclass(frozen=True)
class Match:
    expression: str  # SPDX expression
    method: str  # dice | cover | phrase | spdx_tag
    score: float  # dice / coverage / share of words covered by phrases
    candidate: int = -1  # the matched full text (dice/cover), for its vocabulary


def _matrix(index: LicenseIndex):
    """Candidates x words as CSR, rows sorted by size (built once per index, in memory)."""
    cached = _MATRICES.get(id(index))
    if cached is None:
        import scipy.sparse as sp

        n_cand, n_vocab = len(index.full_exprs), len(index.vocab)
        csc = sp.csc_matrix((np.ones(len(index.cand_ids), np.float32), index.cand_ids, index.indptr),
                            shape=(n_cand, n_vocab))
        order = np.argsort(index.full_sizes, kind="stable")
        cached = (order, index.full_sizes[order], csc.tocsr()[order])
        _MATRICES[id(index)] = cached
    return cached


_MATRICES: dict[int, tuple] = {}


def _rows(matrix, lo: int, hi: int):
    """Rows lo:hi of a CSR matrix as a view (scipy's slicing copies them)."""
    import scipy.sparse as sp

    a, b = matrix.indptr[lo], matrix.indptr[hi]
    return sp.csr_matrix((matrix.data[a:b], matrix.indices[a:b], matrix.indptr[lo:hi + 1] - a),
                         shape=(hi - lo, matrix.shape[1]), copy=False)


def dice_match(index: LicenseIndex, ws: list[str], title: list[str] = ()) -> Match | None:
    distinct = set(ws)
    if len(distinct) < 10:
        return None
    ids = np.fromiter((index.vocab[w] for w in distinct if w in index.vocab), np.int64)
    if not len(ids):
        return None
    order, sizes, matrix = _matrix(index)
    query = np.zeros(len(index.vocab), np.float32)
    query[ids] = 1.0
    n_q = len(distinct)
    # Dice >= DICE_MIN is only reachable for texts of a similar size: score just those rows first
    lo = int(np.searchsorted(sizes, n_q * DICE_MIN / (2 - DICE_MIN), "left"))
    hi = int(np.searchsorted(sizes, n_q * (2 - DICE_MIN) / DICE_MIN, "right"))
    dice = np.zeros(len(order))
    dice[order[lo:hi]] = 2.0 * _rows(matrix, lo, hi).dot(query) / (n_q + sizes[lo:hi])
    best = _pick(index, dice, DICE_MIN, title)
    if best is not None:
        return Match(index.full_exprs[best], "dice", float(dice[best]), best)
    # a file holding a whole license text plus more (appended notices): coverage of the license
    inter = np.zeros(len(order))
    inter[order] = matrix @ query
    cover = np.where(index.full_sizes >= 40, inter / index.full_sizes, 0.0)
    best = _pick(index, cover, COVER_MIN, title)
    if best is not None:
        return Match(index.full_exprs[best], "cover", float(cover[best]), best)
    return None


def candidate_vocab(index: LicenseIndex, cand: int) -> set[str]:
    """The distinct words of one indexed full text."""
    order, _, matrix = _matrix(index)
    row = int(np.flatnonzero(order == cand)[0])
    inv = _VOCAB_LISTS.get(id(index))
    if inv is None:
        inv = _VOCAB_LISTS[id(index)] = [w for w, _ in sorted(index.vocab.items(), key=lambda kv: kv[1])]
    return {inv[i] for i in matrix.indices[matrix.indptr[row]:matrix.indptr[row + 1]]}


_VOCAB_LISTS: dict[int, list[str]] = {}


def _pick(index: LicenseIndex, score: np.ndarray, minimum: float, title: list[str]) -> int | None:
    """Among candidates tied with the best (within 0.002) score, prefer the plainest reading of the text.

    Equal texts carry several names (GPL-2.0-only/-or-later, GFDL variants): the text alone does
    not say "or later", so that reading loses ties; then curated texts beat rules, short names
    beat long ones. A candidate whose title contradicts the file's title line is skipped (a
    renamed, modified license scores high on words but is not the original).
    """
    top = np.flatnonzero(score >= max(minimum, float(score.max()) - 0.002))
    ranked = sorted(top, key=lambda c: (_or_later(index.full_exprs[c]), int(index.full_rank[c]),
                                        len(index.full_exprs[c]), -float(score[c])))
    for c in ranked[:50]:
        if _title_fits(index, int(c), title):
            return int(c)
    return None


def _or_later(expr: str) -> bool:
    return "-or-later" in expr or expr.endswith("+")


_TITLE_IGNORE = {"the", "license", "licence", "version", "v", "and", "of", "a", "public"}
# in a title line inside a file ("New BSD License (3-clause)"): names for a variant, not another license
_WINDOW_TITLE_IGNORE = {"new", "modified", "revised", "simplified", "clause", "clauses", "style", "text", "full",
                        "terms", "conditions", "agreement"}


def title_words(text: str) -> list[str]:
    """Distinctive words of the file's first line when it is a title (`Foo Public License v. 1.0`)."""
    for line in normalize(text).splitlines():
        ws = [_EQUIVALENT.get(w, w) for w in re.findall(r"[a-z0-9]+", line)]
        if not ws:
            continue
        if len(ws) > 12 or "license" not in ws:
            return []
        return [w for w in ws if w not in _TITLE_IGNORE and not w.isdigit()]
    return []


def _title_fits(index: LicenseIndex, cand: int, title: list[str] | tuple[str, ...]) -> bool:
    for w in title:
        wid = index.vocab.get(w)
        if wid is None:
            return False
        postings = index.cand_ids[index.indptr[wid]:index.indptr[wid + 1]]
        if not np.any(postings == cand):
            return False
    return True


def phrase_matches(index: LicenseIndex, ws: list[str]) -> list[tuple[int, int, str]]:
    """Longest non-overlapping phrase rules found in `ws`: (start, end, expression)."""
    found = []
    i, n = 0, len(ws)
    while i < n:
        best = None
        for k in (KEY_WORDS, 2, 1):  # rules shorter than KEY_WORDS are keyed by all their words
            for rid in index.seq_keys.get(tuple(ws[i:i + k]), ()):
                rule, expr, _ = index.seq_rules[rid]
                if len(rule) <= n - i and tuple(ws[i:i + len(rule)]) == rule and (best is None or len(rule) > best[0]):
                    best = (len(rule), expr)
            if best:
                break
        if best:
            found.append((i, i + best[0], best[1]))
            i += best[0]
        else:
            i += 1
    return found


def spdx_tags(index: LicenseIndex, text: str) -> list[str]:
    out = []
    for m in _SPDX_TAG.finditer(text):
        out.append(canonical_expression(index, m.group(1)))
    return out


def canonical_expression(index: LicenseIndex, expr: str) -> str:
    """Canonical case for known SPDX ids; `GPL-2.0+` -> `GPL-2.0-or-later`; operators upper-cased."""
    def repl(m: re.Match) -> str:
        tok = m.group(0)
        low = tok.lower()
        if low in ("and", "or", "with"):
            return low.upper()
        if low.endswith("+") and low[:-1] + "-or-later" in index.spdx_ids:
            return index.spdx_ids[low[:-1] + "-or-later"]
        if low in index.spdx_ids:  # the deprecated bare `GPL-2.0` means `GPL-2.0-only`
            return index.spdx_ids.get(low + "-only", index.spdx_ids[low])
        return tok
    return re.sub(r"[A-Za-z0-9][A-Za-z0-9.\-_]*\+?", repl, expr.strip())


def match_text(text: str, *, index: LicenseIndex | None = None, phrases: bool = True) -> Match | None:
    """The license of one license-like text (a LICENSE file, a README section, a header)."""
    index = index or load_index()
    tags = spdx_tags(index, text)
    if tags:
        return Match(join_expressions(tags), "spdx_tag", 1.0)
    ws = words(text)
    m = dice_match(index, ws, title_words(text))
    if m or not phrases:
        return m
    found = phrase_matches(index, words(text, strip_copyright=False))
    if not found:
        return None
    covered = sum(e - s for s, e, _ in found)
    return Match(join_expressions([e for _, _, e in found]), "phrase", covered / max(len(ws), 1))


def join_expressions(exprs: list[str]) -> str:
    """Distinct expressions in first-seen order, AND-ed (each is parenthesised when compound)."""
    uniq = list(dict.fromkeys(exprs))
    if len(uniq) == 1:
        return uniq[0]
    return " AND ".join(f"({e})" if " " in e else e for e in uniq)


# --- license texts inside a longer file -------------------------------------------------------------

_SEPARATOR = re.compile(r"^\s*(?:[-=*_~#+]\s*){3,}\s*$")
PARA_STRONG = 0.9  # a paragraph of a license text: nearly all its words are the candidate's
WINDOW_MIN_COVER = 0.8  # candidates whose words the file covers this much are tried


@dataclass(frozen=True)
class Located:
    expression: str
    candidate: int
    start: int  # paragraph span [start, end) of `paragraphs(text)`
    end: int
    score: float  # Dice of the window against the candidate's text


def paragraphs(text: str) -> list[str]:
    """Blank lines and separator lines (`-----`, `=====`) end a paragraph; separators are dropped."""
    out, cur = [], []
    for line in text.replace("\r\n", "\n").split("\n"):
        if not line.strip() or _SEPARATOR.match(line):
            if cur:
                out.append("\n".join(cur))
                cur = []
            continue
        cur.append(line)
    if cur:
        out.append("\n".join(cur))
    return out


def locate_texts(paras: list[str], *, index: LicenseIndex, max_texts: int = 4) -> list[Located]:
    """Full license texts among `paras`, in file order; each window holds one text at Dice >= DICE_MIN."""
    order, sizes, matrix = _matrix(index)
    para_words = [set(words(p)) for p in paras]
    alive = [True] * len(paras)
    found: list[Located] = []
    for _ in range(max_texts):
        query_words = set().union(*(w for w, a in zip(para_words, alive) if a))
        ids = np.fromiter((index.vocab[w] for w in query_words if w in index.vocab), np.int64)
        if len(query_words) < 10 or not len(ids):
            break
        query = np.zeros(len(index.vocab), np.float32)
        query[ids] = 1.0
        inter = np.zeros(len(order))
        inter[order] = matrix @ query
        cover = np.where(index.full_sizes >= 40, inter / np.maximum(index.full_sizes, 1), 0.0)
        # shortlist: the candidates that could explain the most words, and those the file covers best
        # (shortened variants: a GPL without its appendix is a rule of its own)
        inter = np.where(cover >= WINDOW_MIN_COVER, inter, 0.0)
        cands = list(dict.fromkeys(int(c) for c in np.concatenate([np.argsort(-inter, kind="stable")[:25],
                                                                    np.argsort(-cover, kind="stable")[:25]])
                                   if inter[c] > 0))
        scored = []  # (candidate, start, end, dice, words explained)
        for c in cands:
            vocab = candidate_vocab(index, c)
            window = _best_window(para_words, alive, vocab)
            if window is not None and window[2] >= DICE_MIN:
                title = [w for w in title_words(paras[window[0]]) if w not in _WINDOW_TITLE_IGNORE]
                if _title_fits(index, c, title):
                    hits = len(set().union(*para_words[window[0]:window[1]]) & vocab)
                    scored.append((c, *window, hits))
        if not scored:
            break
        # the text that explains the most words first (a disclaimer-sized text inside a GPL is not one);
        # among those the best Dice, ties to the plainest reading as in `_pick`
        most = max(s[4] for s in scored)
        scored = [s for s in scored if s[4] >= 0.97 * most]
        top = max(s[3] for s in scored)
        c, start, end, score, _ = min((s for s in scored if s[3] >= top - 0.002),
                                      key=lambda s: (index.full_exprs[s[0]].startswith("LicenseRef-"),
                                                     _or_later(index.full_exprs[s[0]]), int(index.full_rank[s[0]]),
                                                     len(index.full_exprs[s[0]]), -s[3]))
        found.append(Located(_without_noise(index.full_exprs[c]), c, start, end, float(score)))
        for i in range(start, end):
            alive[i] = False
    return sorted(found, key=lambda f: f.start)


def _best_window(para_words: list[set[str]], alive: list[bool], vocab: set[str]) -> tuple[int, int, float] | None:
    """The paragraph span most like the text `vocab`: the richest run of strong paragraphs, grown one
    paragraph at a time (either side, across weak ones such as a changed name) while Dice rises."""
    n = len(para_words)
    strong = [alive[i] and bool(para_words[i]) and len(para_words[i] & vocab) >= PARA_STRONG * len(para_words[i])
              for i in range(n)]
    best_run, best_hits, i = None, 0, 0
    while i < n:
        if not strong[i]:
            i += 1
            continue
        j = i
        union: set[str] = set()
        while j < n and alive[j] and (strong[j] or not para_words[j]):
            union |= para_words[j]
            j += 1
        hits = len(union & vocab)
        if hits > best_hits:
            best_run, best_hits = (i, j, union), hits
        i = j
    if best_run is None:
        return None
    start, end, union = best_run

    def dice(ws: set[str]) -> float:
        return 2.0 * len(ws & vocab) / (len(ws) + len(vocab))

    score = dice(union)
    # trim: a neighbouring text whose words this one mostly shares (an MIT text after a GPL) leaves the run
    while end - start > 1:
        options = []
        for s, e in ((start + 1, end), (start, end - 1)):
            ws = set().union(*para_words[s:e])
            options.append((dice(ws), s, e, ws))
        new, s, e, ws = max(options, key=lambda o: o[0])
        if new < score:
            break
        start, end, union, score = s, e, ws, new
    while True:
        options = []
        if start > 0 and alive[start - 1]:
            options.append((dice(union | para_words[start - 1]), not para_words[start - 1], start - 1, end))
        if end < n and alive[end]:
            options.append((dice(union | para_words[end]), not para_words[end], start, end + 1))
        # grow while Dice rises; a paragraph without words (copyright lines) is crossed when it costs nothing
        options = [o for o in options if o[0] > score or (o[0] == score and o[1])]
        if not options:
            break
        score, _, s, e = max(options)
        union |= para_words[s] if s < start else para_words[e - 1]
        start, end = s, e
    return start, end, score


# ScanCode keys a rule adds for "some other text here" (`GPL-2.0-only AND LicenseRef-scancode-unknown`)
NOISE = re.compile(r"LicenseRef-scancode-(?:unknown|warranty-disclaimer|generic-|other-|free-unknown|see-license)")


def _without_noise(expr: str) -> str:
    # LicenseDB files additional-terms texts (the Commons Clause) as "exceptions"; they restrict, so: AND
    expr = re.sub(r"\bWITH\s+(LicenseRef-)", r"AND \1", expr)
    parts = [p for p in re.split(r"\s+AND\s+", expr) if not NOISE.match(p.strip("() "))]
    return " AND ".join(parts) if parts and " OR " not in expr else expr
