"""English word and sentence splitting exactly as datatrove 0.10.1 does it, but fast.

datatrove's English filters split with spaCy's blank English tokenizer, strip every token and drop
the blank ones; its C4 filter counts sentences with spaCy's rule-based `sentencizer`. To make the
same decisions we use the same tokenizer, but not on whole texts: spaCy cuts a text into runs of
non-whitespace characters (str.isspace, as `str.split()` does) and splits each run on its own by
prefix/suffix/infix rules; whitespace runs only give blank tokens, which datatrove drops. So the
words of a text are the concatenated words of its `str.split()` chunks, and each distinct chunk
is tokenized once per process (a dict lookup afterwards, ~30x faster than spaCy building a Doc):
by a shortcut for the commonest shapes, else by `AffixSplitter` (spaCy's tokenizer loop in Python on
spaCy's own rules, no Doc or lexemes), else (a few special cases spaCy re-matches) by spaCy itself.
A small cache of whole texts lets the filters of one worker (Gopher repetition then quality)
share the work. tests/corpus/web/test_quality_vs_datatrove.py checks the equality on real pages.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from itertools import accumulate
from typing import Iterable

from .stand_in import standing_in

_NLP = None
# what nlp() imports (spaCy, without torch: corpus/web/spacy_import.py): worth preloading once per run (Stage.preload)
SPACY = ("corpus.web.spacy_import",)
_MAX_STRINGS = 2_000_000  # a fresh spaCy pipeline after this many interned strings (bounds memory)
_CHUNKS: dict[str, tuple[str, ...]] = {}
_MAX_CHUNKS = 1_000_000
_TEXTS: "OrderedDict[str, list[str]]" = OrderedDict()
_TEXTS_MAX_CHARS = 32 << 20  # about two batches of long pages
_texts_chars = 0


def nlp():
    """spaCy's blank English pipeline with a sentencizer (no model download)."""
    global _NLP
    if _NLP is None or len(_NLP.vocab.strings) > _MAX_STRINGS:
        spacy = import_spacy()
        _NLP = spacy.blank("en")
        _NLP.add_pipe("sentencizer")
    return _NLP


def import_spacy():
    """spaCy, imported without torch (unless torch is already imported) and without its command line.

    spaCy's machine-learning library (thinc) imports torch when it is installed, to offer torch models;
    the tokenizer and sentencizer used here never touch it, and torch's import costs 1.2 CPU-s per process
    (6 s of wall time on a loaded machine). While spaCy imports, `import torch` raises ImportError, so
    thinc records that it has no torch; torch can still be imported normally afterwards.

    spaCy's `__init__` also imports `spacy.cli.info` for its `spacy.info` function, which pulls in the whole
    command line (model download over requests and httpx, weasel, typer): about half of spaCy's import time
    (~0.4 CPU-s), none of it used by a tokenizer. While spaCy imports, `spacy.cli.info` is a stand-in whose
    `info` imports the real one when called; the stand-in is removed afterwards, so `import spacy.cli` still
    gets the real command line."""
    if "spacy" in sys.modules and "spacy.lang.en" in sys.modules:
        return sys.modules["spacy"]
    hide = "torch" not in sys.modules
    if hide:
        sys.modules["torch"] = None  # type: ignore[assignment]  # import torch -> ImportError
    try:
        with standing_in("spacy.cli.info", "info", unless_imported="spacy"):
            import spacy
            import spacy.lang.en  # noqa: F401
    finally:
        if hide and sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]
    return spacy


def _special_cases() -> frozenset[str]:
    global _SPECIAL
    if _SPECIAL is None:
        _SPECIAL = frozenset(nlp().tokenizer.rules)
    return _SPECIAL


_SPECIAL: frozenset[str] | None = None
_CLOSERS = frozenset(",;:!?)")
# No apostrophes here: spaCy's special cases start with them ('em, 's, 'cause, ...), so chunks that
# start with one always go to spaCy itself.
_OPENERS = frozenset("(\"“[")


def _shortcut(chunk: str, special: frozenset[str]) -> tuple[str, ...] | None:
    """Words of the commonest new chunks without spaCy, where its affix rules are simple: a plain
    word or number is one token; a plain word with one trailing , ; : ! ? ) (or a full stop after a
    lower-case letter), or one leading ( " “ [, splits off that character; letters joined by hyphens split
    at each hyphen; a number with one trailing , . ; : splits it off. Special cases
    ("cannot", "gonna", ...) and everything else (None) go to spaCy itself. Checked against spaCy
    on every chunk of real pages (tests/corpus/web/test_quality_vs_datatrove.py)."""
    if chunk in special:
        return None
    if chunk.isalpha() or (chunk.isdigit() and chunk.isascii()):
        return (chunk,)
    if len(chunk) > 1 and chunk[-1] in _CLOSERS and chunk[:-1].isalpha() and chunk[:-1] not in special:
        return (chunk[:-1], chunk[-1])
    if len(chunk) > 2 and chunk[-1] == "." and chunk[-2].islower() and chunk[:-1].isalpha() and chunk[:-1] not in special:
        return (chunk[:-1], ".")
    if len(chunk) > 2 and chunk[0] in _OPENERS and chunk[1:].isalpha() and chunk[1:] not in special:
        return (chunk[0], chunk[1:])
    if "-" in chunk:  # letters joined by hyphens: spaCy's infix rule splits at each hyphen
        parts = chunk.split("-")
        if len(parts) > 1 and all(p.isalpha() for p in parts):
            out = [parts[0]]
            for p in parts[1:]:
                out += ["-", p]
            return tuple(out)
    if len(chunk) > 1 and chunk[-1] in ",.;:" and chunk[:-1].isdigit() and chunk[:-1].isascii():
        return (chunk[:-1], chunk[-1])  # a number with a trailing comma, stop, semicolon or colon
    return None


class AffixSplitter:
    """spaCy's tokenizer algorithm for one whitespace-free chunk, in Python, on spaCy's own rules.

    The same steps as spaCy 3's `Tokenizer._split_affixes` and `_attach_tokens` (spacy/tokenizer.pyx),
    with the pipeline's own prefix, suffix and infix patterns, URL matcher and special cases, so it
    needs no Doc, no lexemes and no vocabulary growth. spaCy then re-matches some special cases over
    the finished tokens (its PhraseMatcher of cases that contain affixes); a chunk where any run of
    its tokens spells such a case returns None, and spaCy itself tokenizes it. Equality with spaCy
    is tested chunk by chunk on every chunk of the benchmark and development texts
    (tests/corpus/web/test_quality_vs_datatrove.py).
    """

    def __init__(self, tokenizer):
        self.prefix = tokenizer.prefix_search
        self.suffix = tokenizer.suffix_search
        self.infixes = tokenizer.infix_finditer
        self.token_match = tokenizer.token_match
        self.url_match = tokenizer.url_match
        self.specials = {k: tuple(t[65] if 65 in t else t["ORTH"] for t in v) for k, v in tokenizer.rules.items()}
        find = (lambda rx, k: rx is not None and rx(k) is not None)
        self.rematched = frozenset(k for k in self.specials if " " in k or find(self.prefix, k) or find(self.suffix, k)
                                   or (self.infixes is not None and any(True for _ in self.infixes(k))))
        self.longest = max((len(k) for k in self.rematched), default=0)

    def _affix(self, rx, string: str) -> int:
        if rx is None:
            return 0
        m = rx(string)
        return m.end() - m.start() if m is not None else 0

    def split(self, chunk: str) -> tuple[str, ...] | None:
        specials = self.specials
        if chunk in specials:
            tokens = list(specials[chunk])
        else:
            tokens = self._tokenize(chunk)
        if len(tokens) > 1 or chunk in self.rematched:
            if self._rematch_possible(tokens):
                return None
        return tuple(w for w in (t.strip() for t in tokens) if w)

    def _tokenize(self, string: str) -> list[str]:
        specials, token_match = self.specials, self.token_match
        prefixes: list[str] = []
        suffixes: list[str] = []
        last_size = 0
        while string and len(string) != last_size:
            if token_match is not None and token_match(string):
                break
            if string in specials:
                break
            last_size = len(string)
            pre_len = self._affix(self.prefix, string)
            if pre_len:
                prefix, minus_pre = string[:pre_len], string[pre_len:]
                if minus_pre and minus_pre in specials:
                    string = minus_pre
                    prefixes.append(prefix)
                    break
            suf_len = self._affix(self.suffix, string[pre_len:])
            if suf_len:
                suffix, minus_suf = string[-suf_len:], string[:-suf_len]
                if minus_suf and minus_suf in specials:
                    string = minus_suf
                    suffixes.append(suffix)
                    break
            if pre_len and suf_len and pre_len + suf_len <= len(string):
                string = string[pre_len:-suf_len]
                prefixes.append(prefix)
                suffixes.append(suffix)
            elif pre_len:
                string = minus_pre
                prefixes.append(prefix)
            elif suf_len:
                string = minus_suf
                suffixes.append(suffix)
        out: list[str] = []
        for p in prefixes:
            out.extend(specials.get(p, (p,)))
        if string:
            if string in specials:
                out.extend(specials[string])
            elif (token_match is not None and token_match(string)) or (self.url_match is not None
                                                                      and self.url_match(string)):
                out.append(string)
            else:
                start = 0
                for m in (self.infixes(string) if self.infixes is not None else ()):
                    i0, i1 = m.start(), m.end()
                    if i0 == 0:
                        continue
                    if i0 != start:
                        out.append(string[start:i0])
                    if i0 != i1:
                        out.append(string[i0:i1])
                    start = i1
                if string[start:]:
                    out.append(string[start:])
        for sfx in reversed(suffixes):
            out.extend(specials.get(sfx, (sfx,)))
        return out

    def _rematch_possible(self, tokens: list[str]) -> bool:
        """Whether a run of tokens spells a special case that spaCy re-matches after splitting, and
        that it would split differently (re-matching a run into the same tokens changes nothing)."""
        rematched, longest = self.rematched, self.longest
        specials = self.specials
        for i in range(len(tokens)):
            joined = ""
            for j in range(i, len(tokens)):
                joined += tokens[j]
                if len(joined) > longest:
                    break
                if joined in rematched and specials[joined] != tuple(tokens[i:j + 1]):
                    return True
        return False


_SPLITTER: AffixSplitter | None = None


def splitter() -> AffixSplitter:
    global _SPLITTER
    if _SPLITTER is None:
        _SPLITTER = AffixSplitter(nlp().tokenizer)
    return _SPLITTER


def learn_chunks(chunks: Iterable[str]) -> None:
    """Tokenize every chunk not seen yet. The ones without a shortcut go to spaCy together, joined
    by single spaces into one text (spaCy splits at those spaces and nowhere across them, which is
    how datatrove sees them too), and the tokens are mapped back to their chunks by offset: one
    spaCy call per batch instead of one per chunk."""
    if len(_CHUNKS) >= _MAX_CHUNKS:
        _CHUNKS.clear()
    special = _special_cases()
    port = splitter()
    hard = []
    for chunk in set(chunks).difference(_CHUNKS):
        words = _shortcut(chunk, special)
        if words is None:
            words = port.split(chunk)
        if words is not None:
            _CHUNKS[chunk] = words
        elif "'" in chunk or "’" in chunk:
            # spaCy's special cases with apostrophes ('em, 's, n't ...) are re-matched over the
            # tokens around them, so a batch's neighbours can change the split: tokenize alone.
            _CHUNKS[chunk] = tuple(w for w in (t.text.strip() for t in nlp().tokenizer(chunk)) if w)
        else:
            hard.append(chunk)
    for i in range(0, len(hard), 20_000):
        part = hard[i:i + 20_000]
        text = " ".join(part)
        pipeline = nlp()
        pipeline.max_length = max(pipeline.max_length, len(text) + 10)
        per_chunk: list[list[str]] = [[] for _ in part]
        starts = list(accumulate((len(c) + 1 for c in part[:-1]), initial=0))
        k = 0
        for token in pipeline.tokenizer(text):
            while k + 1 < len(starts) and token.idx >= starts[k + 1]:
                k += 1
            word = token.text.strip()
            if word:
                per_chunk[k].append(word)
        for chunk, words in zip(part, per_chunk):
            _CHUNKS[chunk] = tuple(words)


def _chunk_words(chunk: str) -> tuple[str, ...]:
    words = _CHUNKS.get(chunk)
    if words is None:
        learn_chunks([chunk])
        words = _CHUNKS[chunk]
    return words


def spacy_words_of(text: str) -> list[str]:
    """The reference: spaCy on the whole text, tokens stripped, blanks dropped (for tests)."""
    return [w for w in (t.text.strip() for t in nlp().tokenizer(text)) if w]


def _clean(text: str) -> str:
    # spaCy fails on this literal once a memory zone has seen it, and datatrove then drops it from
    # the text; we take that steady state (datatrove's very first such text keeps it).
    return text.replace("IS_ALPHA", "") if "IS_ALPHA" in text else text


def words_of(text: str) -> list[str]:
    """The words of one text, as datatrove's `split_into_words(text, "eng")` returns them."""
    text = _clean(text)
    out: list[str] = []
    get = _CHUNKS.get
    for chunk in text.split():
        words = get(chunk)
        out.extend(words if words is not None else _chunk_words(chunk))
    return out


def split_words(texts: Iterable[str]) -> list[list[str]]:
    """Words of each text (see `words_of`), remembered for the next filter of the same worker."""
    global _texts_chars
    texts = list(texts)
    learn_chunks(chunk for text in texts if text not in _TEXTS for chunk in _clean(text).split())
    out = []
    for text in texts:
        words = _TEXTS.get(text)
        if words is None:
            words = words_of(text)
            _TEXTS[text] = words
            _texts_chars += len(text)
            while _texts_chars > _TEXTS_MAX_CHARS and len(_TEXTS) > 1:
                old, _ = _TEXTS.popitem(last=False)
                _texts_chars -= len(old)
        out.append(words)
    return out


def count_sentences(texts: list[str]) -> list[int]:
    """Sentences per text by spaCy's sentencizer (datatrove's `split_into_sentences`).

    The sentencizer starts a sentence only after a token that is one of its `punct_chars`; a
    non-empty text with no such character before its last one is therefore one sentence, and
    spaCy runs only on the others.
    """
    if not texts:
        return []
    pipeline = nlp()
    punct = frozenset(pipeline.get_pipe("sentencizer").punct_chars)
    out = [0 if not t.strip() else (1 if not any(c in punct for c in t.rstrip()[:-1]) else -1) for t in texts]
    hard = [t for t, n in zip(texts, out) if n == -1]
    if hard:
        pipeline.max_length = max(pipeline.max_length, max(len(t) for t in hard) + 10)
        counts = iter([sum(1 for _ in doc.sents) for doc in pipeline.pipe(hard)])
        out = [next(counts) if n == -1 else n for n in out]
    return out
