"""alt-profanity-check's probabilities without scikit-learn's import: equal to the package's (not close) on real
toxic and clean comments, from a cold and a warm cache; a bad cache file is extracted again."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from corpus.web import peer_profanity


def _real_texts(shared_data) -> list[str]:
    texts = []
    for name in ("wiki_toxicity", "toxic_spans_civil", "ag_news"):
        with gzip.open(shared_data / "safety_real" / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
            texts += [json.loads(line)["text"] for _, line in zip(range(400), f)]
    # 50-word blocks as the safety model sends them, whole comments, and texts with no known word
    blocks = [" ".join(t.split()[i:i + 50]) for t in texts for i in range(0, len(t.split()), 50)]
    return blocks + texts + ["", "!!! ??", "ÜBER ünïcödé", "SHIT Shit shit shit", "a b c"]


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("CIDERMILL_CACHE", str(tmp_path))
    peer_profanity._model.cache_clear()
    yield tmp_path / "peer-profanity"
    peer_profanity._model.cache_clear()


def test_equal_to_the_package_on_real_text_and_a_bad_cache_is_rebuilt(shared_data, fresh):
    from profanity_check import predict_prob   # the reference: the package itself

    texts = _real_texts(shared_data)
    expected = predict_prob(texts)
    assert (expected > 0.5).sum() > 50 and (expected < 0.1).sum() > 200   # both kinds of text are in it
    got = peer_profanity.predict_prob(texts)   # cold: extracted from the package's model, then cached
    assert got.dtype == np.float64 and np.array_equal(got, expected)
    (entry,) = fresh.glob("*.npz")

    peer_profanity._model.cache_clear()
    assert np.array_equal(peer_profanity.predict_prob(texts), expected)   # warm: read from the cache file

    for bad in (entry.read_bytes()[:200], b"not a zip"):
        entry.write_bytes(bad)
        peer_profanity._model.cache_clear()
        assert np.array_equal(peer_profanity.predict_prob(texts[:300]), expected[:300])
        with np.load(entry, allow_pickle=False) as z:
            assert len(z["terms"]) > 1000   # replaced by a good one
    assert peer_profanity.predict_prob([]).shape == (0,)


def test_word_blocks_score_as_their_joined_text(shared_data, fresh):
    """predict_prob_words (the safety model's path: each distinct word tokenised once) equals the package on the
    same blocks joined with spaces, from a cold and a warm word cache."""
    from profanity_check import predict_prob

    from corpus.web import safety_terms

    lex = safety_terms.load()
    texts = _real_texts(shared_data)[-600:]
    blocks = [toks[i:i + 50] for t in texts for toks in [safety_terms.tokens(t, lex)] for i in range(0, len(toks), 50)]
    blocks += [[], ["f*ck", "sh!t", "a$$hole", "don't", "rock'n"], ["x"]]
    expected = predict_prob([" ".join(b) for b in blocks])
    assert (expected > 0.5).sum() > 20
    for _ in range(2):  # cold, then warm
        assert np.array_equal(peer_profanity.predict_prob_words(blocks), expected)


def test_a_warm_process_does_not_import_scikit_learn(fresh):
    peer_profanity.predict_prob(["warm the cache"])
    code = ("import sys; from corpus.web import peer_profanity; p = peer_profanity.predict_prob(['you idiot']); "
            "print(round(float(p[0]), 6), 'sklearn' in sys.modules, 'profanity_check' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ)).stdout.split()
    assert out[1:] == ["False", "False"] and float(out[0]) > 0.5


def test_another_model_shape_uses_the_package(fresh, monkeypatch):
    from profanity_check import predict_prob

    monkeypatch.setattr(peer_profanity, "_extract", lambda: None)
    texts = ["you are a fucking idiot", "the library budget was approved"]
    assert np.array_equal(peer_profanity.predict_prob(texts), predict_prob(texts))
    assert not list(fresh.glob("*.npz"))
