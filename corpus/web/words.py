"""English word and sentence splitting exactly as datatrove 0.10.1 does it, but fast.

datatrove's English filters split with spaCy's blank English tokenizer, strip every token and drop
the blank ones; its C4 filter counts sentences with spaCy's rule-based `sentencizer`. To make the
same decisions we use the same tokenizer, but not on whole texts: spaCy cuts a text into runs of
non-whitespace characters (str.isspace, as `str.split()` does) and splits each run on its own by
prefix/suffix/infix rules; whitespace runs only give blank tokens, which datatrove drops. So the
words of a text are the concatenated words of its `str.split()` chunks, and each distinct chunk
is tokenized once per process (a dict lookup afterwards, ~30x faster than spaCy building a Doc).
A small cache of whole texts lets the filters of one worker (Gopher repetition then quality)
share the work. tests/corpus/web/test_quality_vs_datatrove.py checks the equality on real pages.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterable

_NLP = None
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
        import spacy

        _NLP = spacy.blank("en")
        _NLP.add_pipe("sentencizer")
    return _NLP


def _chunk_words(chunk: str) -> tuple[str, ...]:
    words = _CHUNKS.get(chunk)
    if words is None:
        if len(_CHUNKS) >= _MAX_CHUNKS:
            _CHUNKS.clear()
        words = tuple(w for w in (t.text.strip() for t in nlp().tokenizer(chunk)) if w)
        _CHUNKS[chunk] = words
    return words


def words_of(text: str) -> list[str]:
    """The words of one text, as datatrove's `split_into_words(text, "eng")` returns them."""
    if "IS_ALPHA" in text:
        # spaCy fails on this literal once a memory zone has seen it, and datatrove then drops it
        # from the text; we take that steady state (datatrove's very first such text keeps it).
        text = text.replace("IS_ALPHA", "")
    out: list[str] = []
    get = _CHUNKS.get
    for chunk in text.split():
        words = get(chunk)
        out.extend(words if words is not None else _chunk_words(chunk))
    return out


def split_words(texts: Iterable[str]) -> list[list[str]]:
    """Words of each text (see `words_of`), remembered for the next filter of the same worker."""
    global _texts_chars
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
    """Sentences per text by spaCy's sentencizer (datatrove's `split_into_sentences`)."""
    if not texts:
        return []
    pipeline = nlp()
    pipeline.max_length = max(pipeline.max_length, max(len(t) for t in texts) + 10)
    return [sum(1 for _ in doc.sents) for doc in pipeline.pipe(texts)]
