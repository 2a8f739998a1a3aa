"""Page-safety word evidence: explicit and context terms per category, matched with their inflected
forms and common obfuscations, scored over the worst ~150-word window and over the whole page.

The term list (corpus/web/data/safety/terms_en.tsv, written by the project) separates
- explicit terms, unsafe in any context (slurs, pornographic vocabulary, gore, first-person
  self-harm phrases, threats, swearing), from
- context terms, the clinical and news vocabulary of the same topics (sex, penis, rape, suicide,
  stabbed, nazi, ...). A context term counts only next to an explicit term of the same category in
  the same window, or where context terms of one category are denser than ordinary prose makes them
  (`CONTEXT_FREE` of them in one window).

`evidence(text)` returns, per category, the worst window score and the page's explicit count; the
stage turns these into columns and the filter into decisions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

TERMS_PATH = Path(__file__).resolve().parent / "data" / "safety" / "terms_en.tsv"
CLINICAL_PATH = TERMS_PATH.with_name("clinical_en.txt")  # clinical and counselling words (safety_page's feature)
HEDGING_PATH = TERMS_PATH.with_name("hedging_en.txt")  # hedging, advice and supportive words (safety_page's feature, v7)
CATEGORIES = ("sexual", "hate", "harassment", "violence", "self_harm", "profanity")
TIERS = ("explicit", "context")
WINDOW = 150  # words
CONTEXT_WEIGHT = 0.5  # a context term next to an explicit one of its category
CONTEXT_FREE = 10  # context terms of one category in one window that count without an explicit term

_TOKEN = re.compile(r"[a-z0-9@$*!]*[a-z0-9@$*](?:'[a-z]+)?")
_SPELLED = re.compile(r"(?<![a-z0-9*])[a-z]([.\-_])(?:[a-z]\1){1,}[a-z](?![a-z0-9*])")  # f.u.c.k, s-h-i-t
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "!": "i"})
_REPEAT = re.compile(r"([a-z])\1{2,}")


def inflections(word: str) -> set[str]:
    """The word with plural, -ed, -ing and -er endings (consonant doubling, silent e, y -> ies).
    Words of up to 4 letters get only the plural: their other endings make ordinary words (spic -> spices)."""
    if len(word) <= 4:
        return {word, word + "s", word + "'s"}
    forms = {word, word + "s", word + "es", word + "ed", word + "ing", word + "er", word + "ers", word + "'s"}
    if word.endswith("e"):
        forms |= {word + "d", word[:-1] + "ing", word + "r", word + "rs"}
    if word.endswith("y") and len(word) > 2:
        forms |= {word[:-1] + "ies", word[:-1] + "ied"}
    if len(word) >= 3 and word[-1] not in "aeiouwxy" and word[-2] in "aeiou" and word[-3] not in "aeiou":
        forms |= {word + word[-1] + "ed", word + word[-1] + "ing", word + word[-1] + "er", word + word[-1] + "ers"}
    return forms


@dataclass(frozen=True)
class Lexicon:
    words: dict[str, tuple[int, int]]  # form -> (category index, tier index)
    phrases: dict[str, list[tuple[tuple[str, ...], frozenset, int, int]]]  # first word -> [(middle, last forms, cat, tier)]
    wildcard: tuple[str, ...]  # explicit single words, for masked spellings (f*ck, n***er)


def parse_terms(path: Path) -> list[tuple[str, str, str, bool]]:
    """(term, category, tier, inflect) per line; a clear error names the file and line."""
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 3 or parts[1] not in CATEGORIES or parts[2] not in TIERS:
            raise ValueError(f"{path}:{n}: expected 'term<TAB>category<TAB>tier' with category in {CATEGORIES} "
                             f"and tier in {TIERS}; got {line!r}")
        term, inflect = parts[0].strip().lower(), True
        if term.endswith("="):
            term, inflect = term[:-1], False
        rows.append((term, parts[1], parts[2], inflect))
    return rows


@lru_cache(maxsize=4)
def load(path: Path = TERMS_PATH) -> Lexicon:
    words: dict[str, tuple[int, int]] = {}
    phrases: dict[str, list] = {}
    wild = []
    for term, cat, tier, inflect in parse_terms(Path(path)):
        key = (CATEGORIES.index(cat), TIERS.index(tier))
        parts = term.split()
        if len(parts) == 1:
            for form in (inflections(term) if inflect else {term}):
                if form not in words or key[1] < words[form][1]:  # explicit wins over context
                    words[form] = key
            if tier == "explicit" and len(term) >= 4:
                wild.append((term, key))
        else:
            lasts = frozenset(inflections(parts[-1]) if inflect else {parts[-1]})
            phrases.setdefault(parts[0], []).append((tuple(parts[1:-1]), lasts, *key))
    # A masked spelling keeps the first and last letters and hides some inner ones (f*ck, sh*t, n***er).
    wildcard = tuple(sorted({w for w, _ in wild}))
    return Lexicon(words, phrases, wildcard)


@lru_cache(maxsize=8)
def word_list(path: Path) -> frozenset:
    """A plain word list (one form a line, '#' comments); an empty list is an error naming the file."""
    words = frozenset(w.strip().lower() for w in Path(path).read_text(encoding="utf-8").splitlines()
                      if w.strip() and not w.startswith("#"))
    if not words:
        raise ValueError(f"{path}: no words (expected one word a line)")
    return words


def clinical_words(path: Path = CLINICAL_PATH) -> frozenset:
    """The clinical and helping-register words."""
    return word_list(path)


def hedging_words(path: Path = HEDGING_PATH) -> frozenset:
    """The hedging, advice and supportive-register words (v7)."""
    return word_list(path)


def _deobfuscate(token: str, lex: Lexicon) -> str:
    plain = token.translate(_LEET)
    if plain in lex.words or "*" not in plain:
        return plain
    for word in lex.wildcard:  # same length, every shown letter equal, at least 2 shown
        if len(word) == len(plain) and all(c == "*" or c == w for c, w in zip(plain, word)) \
                and len(plain) - plain.count("*") >= 2:
            return word
    return plain


def _gates(low: str) -> tuple[bool, bool, bool]:
    """Whether `low` has (a) a letter, one of .-_, a letter, one of .-_, a letter (the pre-check for _SPELLED),
    (b) a letter three times in a row (_REPEAT) and (c) a letter, a run of 0-9@$*!, a letter (maybe leetspeak
    or masking), from one array of its code points. Each as a regex search tries a match at every letter:
    ~0.5 ms of a 5 KB page's ~3 ms; these are ~0.05 ms together, with the same answers."""
    c = np.frombuffer(low.encode("utf-32-le", "surrogatepass"), np.uint32)
    letter = (c >= 97) & (c <= 122)
    sep = (c == 46) | (c == 45) | (c == 95)
    spelled = bool((letter[:-4] & sep[1:-3] & letter[2:-2] & sep[3:-1] & letter[4:]).any())
    repeat = bool((letter[:-2] & (c[:-2] == c[1:-1]) & (c[1:-1] == c[2:])).any())
    kept = np.flatnonzero(~(((c >= 48) & (c <= 57)) | (c == 64) | (c == 36) | (c == 42) | (c == 33)))
    gap = np.diff(kept) > 1  # a run of 0-9@$*! between kept[k] and kept[k + 1]
    odd = bool((letter[kept[:-1][gap]] & letter[kept[1:][gap]]).any())
    return spelled, repeat, odd


def tokens(text: str, lex: Lexicon) -> list[str]:
    """Lower-case word tokens, de-obfuscated: spelled-out words joined (f.u.c.k, s-h-i-t), runs of 3+ letters shortened
    to one, leetspeak and masked spellings of explicit words resolved."""
    low = text.lower()
    spelled, repeat, odd = _gates(low)
    if spelled and _SPELLED.search(low):
        low = _SPELLED.sub(lambda m: re.sub(r"[.\-_]", "", m.group()), low)
        _, repeat, odd = _gates(low)
    if repeat:
        low = _REPEAT.sub(r"\1", low)  # shortening a run of one letter keeps every letter beside 0-9@$*!: `odd` holds
    toks = _TOKEN.findall(low)
    if odd:  # only tokens that de-obfuscate to a listed word are replaced
        words = lex.words
        fix = {}
        for t in set(toks):
            if not t.isalpha() and not t.isdigit() and t not in words and "'" not in t:
                plain = _deobfuscate(t, lex)
                if plain in words:
                    fix[t] = plain
        if fix:
            toks = [fix.get(t, t) for t in toks]
    return toks


def hits(toks: list[str], lex: Lexicon) -> list[tuple[int, int, int]]:
    """(position, category, tier) of every matched term (a phrase at its first word)."""
    words, phrases = lex.words, lex.phrases
    uniq = set(toks)
    present = uniq & words.keys()
    out = [(i, *words[t]) for i, t in enumerate(toks) if t in present] if present else []
    firsts = uniq & phrases.keys()
    n = len(toks)
    for i in ([i for i, t in enumerate(toks) if t in firsts] if firsts else []):
        for mid, lasts, cat, tier in phrases[toks[i]]:
            j = i + 1 + len(mid)
            if j < n and toks[j] in lasts and (not mid or tuple(toks[i + 1:j]) == mid):
                out.append((i, cat, tier))
                break
    out.sort()
    return out


def window_scores(found: list[tuple[int, int, int]], window: int = WINDOW) -> list[float]:
    """Per category, the highest score of any `window`-word span: explicit terms count 1; context
    terms count CONTEXT_WEIGHT next to an explicit term of the category, and alone only past
    CONTEXT_FREE of them."""
    best = [0.0] * len(CATEGORIES)
    by_cat: dict[int, list[tuple[int, int]]] = {}
    for pos, cat, tier in found:
        by_cat.setdefault(cat, []).append((pos, tier))
    for cat, items in by_cat.items():
        lo, explicit, context = 0, 0, 0
        for hi, (pos, tier) in enumerate(items):
            explicit += tier == 0
            context += tier == 1
            while items[lo][0] <= pos - window:
                explicit -= items[lo][1] == 0
                context -= items[lo][1] == 1
                lo += 1
            if explicit:
                score = explicit + CONTEXT_WEIGHT * context
            else:
                score = CONTEXT_WEIGHT * (context - CONTEXT_FREE + 1) if context >= CONTEXT_FREE else 0.0
            best[cat] = max(best[cat], score)
    return best


def evidence(text: str, lex: Lexicon | None = None, toks: list[str] | None = None) -> tuple[list[float], list[int], int]:
    """(worst-window score per category, explicit terms per category on the page, number of words)."""
    lex = lex or load()
    toks = tokens(text or "", lex) if toks is None else toks
    found = hits(toks, lex)
    explicit = [0] * len(CATEGORIES)
    for _, cat, tier in found:
        if tier == 0:
            explicit[cat] += 1
    return window_scores(found), explicit, len(toks)
