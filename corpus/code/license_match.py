"""Match one text against the license index: whole-file Dice, then phrases, then SPDX tags.

- Dice (2|A∩B| / (|A|+|B|) over distinct words, as licensee does) recognises a license file even
  when reflowed, Markdown-formatted or with another copyright holder; a modified license (a
  changed clause) falls under the threshold and stays unknown rather than passing as the original.
- Phrases (ScanCode notices/references/tags) find "Licensed under the Apache License, Version
  2.0" in a README or a file header.
- `SPDX-License-Identifier:` tags are read as expressions directly.
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


def _title_fits(index: LicenseIndex, cand: int, title: list[str]) -> bool:
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
