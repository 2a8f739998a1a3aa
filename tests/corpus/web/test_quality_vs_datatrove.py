"""Our Gopher/C4/FineWeb filters make datatrove 0.10.1's decisions, with its reasons, on real pages."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from corpus.registry import stage_class
from corpus.web.ngrams import JoinedWords, duplicated_ngram_chars, later_occurrences, top_ngram_chars

from .conftest import c4_texts, table_of

pytest.importorskip("datatrove", reason="datatrove is the reference (requirements/web.txt)")
pytest.importorskip("spacy", reason="datatrove's English word splitting needs spaCy")

# Short real-looking pages that trip each rule (the corpus pages alone do not reach every reason).
EDGE = [
    "",
    "   \n\n  ",
    "word " * 10,
    "\n".join(["- item number one of the list is here and it is good"] * 3 + ["• another bullet point here"] * 40),
    "\n".join(f"The line {i} of this page trails off and then nothing at all ..." for i in range(60)),
    "#tag " * 30 + " ".join(["the cat and the dog sat with a hat"] * 10),
    "Lorem ipsum dolor sit amet, the consectetur adipiscing elit.\n" * 3 + "The end of the story is near. " * 20,
    "The function is { return x; } and that is all.\nThe rest is plain text that ends well.\n" * 4,
    "One short line.\nAnother short one.\nThe last short line.",
    "Supercalifragilisticexpialidocious " * 60,
    "a b c d e f g h i j k l m n o p q r s t u v w x y z " * 10,
    "The same paragraph repeats here.\n\nThe same paragraph repeats here.\n\nThe same paragraph repeats here.",
    ("We use cookies to improve your experience. Read our privacy policy.\n" * 3
     + "JavaScript must be enabled to view this page.\n"
     + "This is a real sentence. It has words. Then more words follow here! Is it true? Yes it is.\n"),
    "IS_ALPHA and the other strange strings of the page with the words of the text " * 5,
]


def _datatrove_chain(texts, c4_options):
    from datatrove.data import Document
    from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                            GopherRepetitionFilter)

    from datatrove.utils.text import split_into_words

    for _ in range(2):  # datatrove keeps the literal IS_ALPHA only the first time (a spaCy quirk)
        split_into_words(f"warm up IS_ALPHA {random.random()}")
    filters = [("gopher_repetition_v1", GopherRepetitionFilter()), ("gopher_quality_v1", GopherQualityFilter()),
               ("c4_quality_v1", C4QualityFilter(**c4_options)), ("fineweb_quality_v1", FineWebQualityFilter())]
    out, final_texts = [], []
    for i, text in enumerate(texts):
        doc, decision = Document(text=text, id=str(i)), None
        for name, f in filters:
            result = f.filter(doc)
            if result is not True:
                decision = (name, result[1] if isinstance(result, tuple) else None)
                break
        out.append(decision)
        final_texts.append(doc.text if decision is None else None)
    return out, final_texts


def _our_chain(texts, c4_options):
    table = table_of(texts)
    decisions = {}
    for name, options in [("gopher_repetition_v1", {}), ("gopher_quality_v1", {}),
                          ("c4_quality_v1", c4_options), ("fineweb_quality_v1", {})]:
        result = stage_class(name)(options)(table)
        if result.rejects is not None:
            for rid, reason in zip(result.rejects.column("id").to_pylist(),
                                   result.rejects.column("drop_reason").to_pylist()):
                decisions[rid] = (name, reason)
        table = result.table
    kept = dict(zip(table.column("id").to_pylist(), table.column("text").to_pylist()))
    ids = [f"d{i}" for i in range(len(texts))]
    return [decisions.get(i) for i in ids], [kept.get(i) for i in ids]


def _extracted_pages(folder, n):
    from corpus.web.extract import extract_page

    pages = sorted(p for p in folder.iterdir() if (p / "source.html").is_file())[:n]
    return [extract_page((p / "source.html").read_bytes(), None, None, extractor="resiliparse").text for p in pages]


@pytest.mark.slow
@pytest.mark.parametrize("c4_options", [{}, {"filter_no_terminal_punct": False}], ids=["c4-default", "fineweb-c4"])
def test_same_decisions_reasons_and_text_as_datatrove(c4_options, readability_dir):
    texts = c4_texts()[:120] + _extracted_pages(readability_dir, 70) + EDGE
    expected, expected_texts = _datatrove_chain(texts, c4_options)
    got, got_texts = _our_chain(texts, c4_options)
    mismatches = [(i, e, g) for i, (e, g) in enumerate(zip(expected, got)) if e != g]
    assert not mismatches, mismatches[:5]
    assert got_texts == expected_texts  # C4 rewrites the text of kept pages the same way
    reasons = {g for g in got if g}
    assert len(reasons) >= 8, reasons  # the set exercises many different rules, not only "keep"
    assert sum(g is None for g in got) >= 50


def _datatrove_ngram_values(words, n):
    from datatrove.pipeline.filters.gopher_repetition_filter import find_all_duplicate, find_top_duplicate, get_n_grams

    grams = get_n_grams(words, n)
    return (find_top_duplicate(grams) if grams else None), find_all_duplicate(words, n)


def test_hashed_ngrams_equal_datatrove_string_ngrams():
    rng = random.Random(7)
    vocab = ["a", "ab", "b", "ba", "the", "cat", "ca", "t", "é", "ü", "x" * 12, "."]
    for trial in range(300):
        words = [rng.choice(vocab[: rng.randint(2, len(vocab))]) for _ in range(rng.randint(0, 60))]
        for n in range(2, 11):
            top, dup = _datatrove_ngram_values(words, n)
            h, lengths = JoinedWords(words, " ").ngrams(n)
            assert (top_ngram_chars(h, lengths) if len(h) else None) == top, (words, n)
            h, lengths = JoinedWords(words, "").ngrams(n)
            assert duplicated_ngram_chars(h, lengths, n) == dup, (words, n)


def _repeating_words(rng):
    """Words with runs copied from earlier in the text (so that n-grams of every n repeat, overlapping)."""
    vocab = ["a", "ab", "b", "ba", "the", "cat", "ca", "t", "é", "x" * 9, "."]
    words = [rng.choice(vocab) for _ in range(rng.randint(0, 30))]
    for _ in range(rng.randint(0, 4)):
        if words:
            start = rng.randrange(len(words))
            words += words[start:start + rng.randint(1, 15)] + [rng.choice(vocab) for _ in range(rng.randint(0, 8))]
    return words


def test_later_occurrences_of_the_shortest_gram_bound_datatrove_duplicate_count():
    rng = random.Random(11)
    for trial in range(400):
        words = _repeating_words(rng)
        glued = JoinedWords(words, "")
        later = later_occurrences(glued.ngrams(5)[0])
        for n in range(5, 11):
            _, dup = _datatrove_ngram_values(words, n)
            assert dup <= glued.span_chars(later, n), (words, n)


def test_repetition_reasons_and_evidence_equal_datatrove_on_repeating_texts():
    from datatrove.data import Document
    from datatrove.pipeline.filters import GopherRepetitionFilter

    from datatrove.utils.text import split_into_words

    rng = random.Random(5)
    vocab = "the cat sat on a mat and dog ran far away quickly home while birds sang over green hills".split()
    sentences = [" ".join(rng.choice(vocab) for _ in range(rng.randint(4, 12))) + "." for _ in range(60)]
    texts = []
    for _ in range(150):  # one paragraph of sentences, 0-4 of them repeats: around the n-gram limits
        k = rng.randint(5, 30)
        pool = rng.sample(sentences, k)
        texts.append(" ".join(pool + rng.choices(pool, k=rng.randint(0, 4))))
    peer = GopherRepetitionFilter()
    table = table_of(texts)
    result = stage_class("gopher_repetition_v1")({})(table)
    got = dict(zip(result.rejects.column("id").to_pylist(), zip(result.rejects.column("drop_reason").to_pylist(),
                                                                result.rejects.column("drop_detail").to_pylist())))
    dup_reasons = 0
    for i, text in enumerate(texts):
        verdict = peer.filter(Document(text=text, id=str(i)))
        expected = None if verdict is True else verdict[1]
        reason, detail = got.get(f"d{i}", (None, None))
        assert reason == expected, (i, text)
        if reason and reason.startswith("duplicated_"):
            dup_reasons += 1
            n = int(reason.split("_")[1])
            _, dup = _datatrove_ngram_values(split_into_words(text, "eng"), n)
            assert json.loads(detail)["duplicated_chars"] == dup
    assert dup_reasons >= 10 and sum(r is None for r in (got.get(f"d{i}", (None,))[0] for i in range(150))) >= 10


def test_edge_pages_get_datatrove_reasons():
    got, _ = _our_chain(EDGE[:3], {})
    assert got[0] == ("gopher_repetition_v1", "empty")
    assert got[2][0] == "gopher_repetition_v1"  # "word word ..." repeats every n-gram
    assert np.all([g is not None for g in got])


def test_chunk_words_equal_spacy_on_every_word_of_real_pages(readability_dir):
    from corpus.web import words

    texts = c4_texts()[:150] + _extracted_pages(readability_dir, 40)
    for text in texts:
        assert words.words_of(text) == words.spacy_words_of(text)
    chunks = {c for t in texts for c in t.split()}
    for chunk in random.Random(3).sample(sorted(chunks), 4000):
        words._CHUNKS.pop(chunk, None)
        assert words._chunk_words(chunk) == tuple(words.spacy_words_of(chunk)), chunk


def test_sentence_counts_equal_spacy_sentencizer():
    from datatrove.utils.text import split_into_sentences

    from corpus.web.words import count_sentences

    lines = [line.strip() for t in c4_texts()[:60] for line in t.splitlines() if line.strip()]
    lines += ["One. Two! Three?", "No stop at all", "Ends with a quote.\"", "Hi... there", "x", "Wait — what?!"]
    assert count_sentences(lines) == [len(split_into_sentences(line)) for line in lines]


def test_chunks_learned_in_one_batch_equal_spacy_per_chunk(readability_dir):
    from corpus.web import words

    texts = c4_texts()[150:220] + _extracted_pages(readability_dir, 30)
    chunks = sorted({c for t in texts for c in t.split()})
    words._CHUNKS.clear()
    words.learn_chunks(chunks)
    sample = random.Random(5).sample(chunks, 3000)
    assert [words._CHUNKS[c] for c in sample] == [tuple(words.spacy_words_of(c)) for c in sample]


@pytest.mark.slow
def test_affix_splitter_equals_spacy_on_every_chunk_of_the_available_texts(readability_dir):
    """The Python port of spaCy's tokenizer loop against spaCy, chunk by chunk: every chunk of the
    C4 sample, of the Readability gold articles and of the main text of every bundled WARC page."""
    import lxml.html

    from corpus.web import words

    from .conftest import warc_rows

    texts = c4_texts() + [lxml.html.fromstring((p / "expected.html").read_bytes()).text_content()
                          for p in sorted(readability_dir.iterdir()) if (p / "expected.html").is_file()]
    out = stage_class("web_extract_v1")({})(warc_rows()).table
    texts += out.column("text").to_pylist()
    chunks = sorted({c for t in texts for c in t.split()})
    chunks += ["don't", "'em", "it's.", "(e.g.", "http://x.org/a?b=1).", ":-)", "U.S.A.,", "$3.50!", "12-year-old",
               "'em--can't", "C++", "a.m.)", "“Hello”", "'s", "o'clock", "Mr.", "ca.", "1.)", "vs.'"]
    port = words.splitter()
    proven = 0
    for chunk in chunks:
        got = port.split(chunk)
        if got is not None:  # None: spaCy decides (a special case it would re-match)
            assert got == tuple(words.spacy_words_of(chunk)), chunk
            proven += 1
    assert len(chunks) > 20_000 and proven / len(chunks) > 0.99
