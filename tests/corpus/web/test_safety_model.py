"""The page-safety model's parts (web_safety_v3): windows, the window logit against a plain re-computation,
training features equal to the scoring path, units of equal length for both classes, the threshold rule and
group weights. Unit tests on constructed text and tiny hand-made models (not results)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from corpus.web import safety_page, safety_terms, safety_train, safety_units


def test_window_bounds_cover_the_page_with_the_last_window_at_the_end():
    assert safety_page.window_bounds(0).tolist() == [[0, 0]]
    assert safety_page.window_bounds(100).tolist() == [[0, 100]]
    assert safety_page.window_bounds(101).tolist() == [[0, 100], [1, 101]]
    assert safety_page.window_bounds(230).tolist() == [[0, 100], [50, 150], [100, 200], [130, 230]]
    assert safety_page.window_bounds(200).tolist() == [[0, 100], [50, 150], [100, 200]]


def _tiny_model(words: dict[str, float], lex_weight: np.ndarray, intercept: float) -> safety_page.PageModel:
    names = sorted(words)
    meaning = np.array([words[w] for w in names] + [0.0])
    k = 2
    return safety_page.PageModel(
        vocab={w: i for i, w in enumerate(names)}, meaning_weight=meaning, lex_weight=lex_weight, intercept=intercept,
        categories=("sexual", "hate"), cat_meaning=np.zeros((len(names) + 1, k)),
        cat_lex=np.zeros((safety_page.N_LEX, k)), cat_intercept=np.array([0.0, 1.0]), threshold=0.5)


def test_window_logit_equals_a_plain_recomputation():
    lex = safety_terms.load()
    lex_weight = np.arange(safety_page.N_LEX, dtype=float) / 10
    model = _tiny_model({"vermin": 2.0, "budget": -1.0, "the": 0.1}, lex_weight, -1.5)
    text = ("the budget " * 60) + "those kikes are vermin, vermin I say " + ("the budget " * 40)
    toks = safety_terms.tokens(text, lex)
    ids = safety_page.token_ids(toks, model)
    lexpos = safety_page.lex_positions(toks, lex)
    bounds = safety_page.window_bounds(len(toks))
    z = safety_page.window_logits(ids, lexpos, model, bounds)
    found = safety_terms.hits(toks, lex)  # the list's terms: 'kikes' (hate, explicit) and hate phrases
    assert {(c, t) for _, c, t in found} == {(1, 0), (1, 1)}
    weights = {"vermin": 2.0, "budget": -1.0, "the": 0.1}
    for (s, e), got in zip(bounds.tolist(), z):
        window = toks[s:e]
        expected = -1.5 + sum(weights.get(t, 0.0) for t in window) / len(window)
        for cat, tier in {(c, t) for _, c, t in found}:
            count = sum(1 for p, c, t in found if s <= p < e and (c, t) == (cat, tier))
            expected += math.log1p(count) * lex_weight[2 * cat + tier]
        assert got == pytest.approx(expected, abs=1e-9)
    page = safety_page.score_tokens(toks, model, lex)
    worst = int(np.argmax(z))
    assert (page.start, page.end) == tuple(bounds[worst])
    assert page.score == pytest.approx(1 / (1 + math.exp(-z[worst])))
    assert page.category == "hate"  # the tiny category head's intercept favours it
    assert safety_page.top_words(toks, model, page.start, page.end) == ["vermin", "the"]


def test_training_features_give_the_same_logit_as_the_scoring_path():
    """A unit of up to one window: the head's decision function on Features.matrix equals window_logits
    of the folded PageModel (the weights the stage ships)."""
    rng = np.random.default_rng(0)
    words = ["bitch", "budget", "fucking", "library", "meeting", "stupid", "the", "you"]
    feats = safety_train.Features(words, rng.normal(size=(len(words), 8)).astype(np.float32))
    units = [safety_units.Unit("you stupid fucking bitch".split() * 3, 1, "harassment", "a", False),
             safety_units.Unit("the library budget meeting".split() * 3, 0, "news", "b", False),
             safety_units.Unit("you fucking stupid".split() * 4, 1, "profanity", "a", False),
             safety_units.Unit("the meeting library".split() * 4, 0, "health", "c", False)]
    x = feats.matrix([u.tokens for u in units])
    model = safety_train.fit(feats, x, units)
    from sklearn.linear_model import LogisticRegression

    y = np.array([u.label for u in units])
    head = LogisticRegression(C=safety_train.C, max_iter=5000).fit(
        x, y, sample_weight=safety_train.group_weights(y, np.array([u.source for u in units])))
    lex = safety_terms.load()
    for u, expected in zip(units, head.decision_function(x)):
        ids = safety_page.token_ids(u.tokens, model)
        z = safety_page.window_logits(ids, safety_page.lex_positions(u.tokens, lex), model,
                                      safety_page.window_bounds(len(u.tokens)))
        assert z.tolist() == pytest.approx([expected], abs=1e-6)
    assert model.categories == ("harassment", "profanity")


def test_units_give_both_classes_the_same_lengths():
    rows, toks = [], []
    for i in range(300):  # short unsafe posts, long safe articles: the confound the units remove
        rows.append({"source": "posts", "label": 1, "category": "hate", "text": f"post {i}"})
        toks.append([f"w{i}"] * (5 + i % 20))
    for i in range(40):
        rows.append({"source": "news", "label": 0, "category": "news", "text": f"article {i}"})
        toks.append([f"n{i}"] * (300 + 7 * i))
    units = safety_units.train_units(rows, toks)
    lengths = {lab: [len(u.tokens) for u in units if u.label == lab] for lab in (0, 1)}
    for lab in (0, 1):
        assert min(lengths[lab]) >= safety_units.MIN_WORDS // 2 and max(lengths[lab]) <= safety_units.MAX_WORDS + 24
        assert 85 <= np.median(lengths[lab]) <= 115
    assert units == safety_units.train_units(rows, toks)  # seeded: the same units every time
    # a source's units do not depend on the other sources present (leave-one-source-out folds share them)
    alone = safety_units.train_units(rows[:300], toks[:300])
    assert alone == [u for u in units if u.source == "posts"]


def test_eval_pages_keep_long_rows_and_join_short_ones_of_one_category():
    rows = [{"source": "s", "label": 1, "category": "hate", "text": f"short {i}"} for i in range(5)]
    rows += [{"source": "s", "label": 1, "category": "hate", "text": "long"},
             {"source": "s", "label": 1, "category": "sexual", "text": "other category"}]
    toks = [["a"] * 20] * 5 + [["b"] * 60, ["c"] * 20]
    pages = safety_units.eval_pages(rows, toks)
    assert sorted((p.category, len(p.tokens), p.natural) for p in pages) == [("hate", 60, False), ("hate", 60, True)]
    joined = next(p for p in pages if not p.natural)
    assert joined.text.count("\n\n") == 2 and joined.text.startswith("short ")  # three rows joined; two left over


def test_threshold_and_group_weights():
    scores = np.linspace(0, 1, 401)  # 0.5% of 401 is 2 pages: exactly the top 2 lie above the threshold
    assert (scores > safety_train.choose_threshold(scores)).sum() == 2
    labels = np.array([1, 1, 1, 0, 0, 0, 0])
    groups = np.array(["a", "a", "b", "c", "c", "c", "d"])
    w = safety_train.group_weights(labels, groups)
    # each label half the total; within a label, each group the same share
    assert w[:2].sum() == pytest.approx(w[2]) and w[3:6].sum() == pytest.approx(w[6])
    assert w[:3].sum() == pytest.approx(w[3:].sum()) and w.mean() == pytest.approx(1.0)


def test_bad_row_files_name_file_and_line(tmp_path):
    import gzip

    with gzip.open(tmp_path / "x.jsonl.gz", "wt") as f:
        f.write('{"text": "ok", "label": 0, "category": "news", "source": "x"}\n{"text": "bad", "label": 2}\n')
    with pytest.raises(ValueError, match=r"x.jsonl.gz:2: expected JSON"):
        safety_units.read_rows(tmp_path)
    with pytest.raises(FileNotFoundError, match="no \\*.jsonl.gz"):
        safety_units.read_rows(tmp_path / "missing")
