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


def _tiny_model(grams: dict[str, float], lex_weight: np.ndarray, intercept: float) -> safety_page.PageModel:
    return safety_page.PageModel.of_ngrams(
        {g: np.array([w, 0.0, 0.0]) for g, w in grams.items()}, lex_weight=lex_weight, intercept=intercept,
        categories=("sexual", "hate"), cat_lex=np.zeros((safety_page.N_LEX + 1, 2)), cat_intercept=np.array([0.0, 1.0]),
        threshold=0.5)


def test_window_logit_equals_a_plain_recomputation():
    lex = safety_terms.load()
    lex_weight = np.arange(safety_page.N_LEX + 1, dtype=float) / 10
    weights = {"vermin": 2.0, "budget": -1.0, "the": 0.1, "are vermin": 1.5, "the budget": -0.25, "budget those": 3.0}
    model = _tiny_model(weights, lex_weight, -1.5)
    text = ("the budget " * 40) + "those kikes are vermin, vermin I say " + ("the budget " * 30) \
        + "the therapist's patients may often cope"
    toks = safety_terms.tokens(text, lex)
    ids = safety_page.ngram_ids(toks, model)
    lexpos = safety_page.lex_positions(toks, lex)
    peer = np.linspace(0, 1, len(toks))  # stand-in peer probabilities per word
    bounds = safety_page.window_bounds(len(toks))
    z = safety_page.window_logits(ids, lexpos, peer, model, bounds)
    found = safety_terms.hits(toks, lex)  # the list's terms: 'kikes' (hate, explicit) and hate phrases
    assert {(c, t) for _, c, t in found} == {(1, 0), (1, 1)}

    def expected_logit(s: int, e: int) -> float:
        window = toks[s:e]
        pairs = [f"{a} {b}" for a, b in zip(window, window[1:])]  # only pairs wholly inside the window
        expected = -1.5 + sum(weights.get(g, 0.0) for g in window + pairs) / len(window)
        for cat, tier in {(c, t) for _, c, t in found}:
            count = sum(1 for p, c, t in found if s <= p < e and (c, t) == (cat, tier))
            expected += math.log1p(count) * lex_weight[2 * cat + tier]
        explicit = sum(1 for p, c, t in found if s <= p < e and t == 0)  # explicit terms of any category
        clinical = sum(1 for w in window if w in ("therapist", "patients", "cope"))  # words of clinical_en.txt
        hedging = sum(1 for w in window if w in ("may", "often", "cope"))  # words of hedging_en.txt
        return expected + math.log1p(explicit) * lex_weight[-4] + math.log1p(clinical) * lex_weight[-3] \
            + math.log1p(hedging) * lex_weight[-2] + float(np.mean(peer[s:e])) * lex_weight[-1]

    for (s, e), got in zip(bounds.tolist(), z):
        assert got == pytest.approx(expected_logit(s, e), abs=1e-9)
    page = safety_page.score_tokens(toks, model, lex, peer=peer)
    worst = int(np.argmax(z))
    assert (page.start, page.end) == tuple(bounds[worst])
    # the page (under CONTEXT words) is the worst window's context: the score is the geometric mean of both
    assert (page.context_start, page.context_end) == (0, len(toks)) and len(toks) < safety_page.CONTEXT
    p_window, p_page = 1 / (1 + math.exp(-z[worst])), 1 / (1 + math.exp(-expected_logit(0, len(toks))))
    assert page.window == pytest.approx(p_window) and page.context == pytest.approx(p_page)
    # v8: times (1 + the share of the context's windows with P(unsafe) > 0.5) / 2; here the context is the page
    share = sum(1 / (1 + math.exp(-expected_logit(int(s), int(e)))) > 0.5 for s, e in bounds) / len(bounds)
    assert page.share == pytest.approx(share) and 0 < share
    assert page.score == pytest.approx(math.sqrt(p_window * p_page) * (1 + share) / 2) and page.score < p_window
    assert page.category == "hate"  # the tiny category head's intercept favours it
    assert safety_page.top_words(toks, model, page.start, page.end) == ["budget those", "vermin", "are vermin", "the"]
    assert set(model.ngram_weights()) == set(weights)  # the artifact's form round-trips


def test_clinical_words_are_one_column_of_whole_words():
    """therapist and patients are in clinical_en.txt; therapeutically, healthier and 'care-free' parts are not
    whole-word forms of it (the list is matched as written, no inflection)."""
    lex = safety_terms.load()
    toks = safety_terms.tokens("The therapist saw patients; therapeutically healthier, care free. Health!", lex)
    col = safety_page.lex_positions(toks, lex)[:, safety_page.CLINICAL]
    assert [t for t, c in zip(toks, col) if c] == ["therapist", "patients", "care", "health"]
    assert safety_page.N_LEX == 2 * len(safety_terms.CATEGORIES) + 3 and safety_page.EXPLICIT == safety_page.N_LEX - 3


def test_hedging_words_are_one_column_of_whole_words():
    """may, often, suggest and help are in hedging_en.txt (v7); 'maybe', 'helped' and 'suggestion' are not
    (whole words as written); 'cope' is in both lists, so it counts in both columns."""
    lex = safety_terms.load()
    toks = safety_terms.tokens("You may often cope; maybe I helped. My suggestion: suggest help!", lex)
    pos = safety_page.lex_positions(toks, lex)
    assert [t for t, c in zip(toks, pos[:, safety_page.HEDGING]) if c] == ["may", "often", "cope", "suggest", "help"]
    assert [t for t, c in zip(toks, pos[:, safety_page.CLINICAL]) if c] == ["cope"]
    assert safety_page.HEDGING == safety_page.N_LEX - 1 and safety_page.CLINICAL == safety_page.N_LEX - 2


def test_a_model_of_another_feature_count_is_refused_by_name(tmp_path):
    arrays = safety_page.to_arrays(_tiny_model({}, np.zeros(safety_page.N_LEX + 1), 0.0))
    arrays["lex_weight"] = arrays["lex_weight"][:-1]  # v6 had one feature fewer
    path = tmp_path / "old.npz"
    safety_page.save(path, arrays, {"threshold": 0.8, "page_score_rule": safety_page.SCORE_RULE})
    with pytest.raises(ValueError, match="old.npz.*15 feature weights, this code scores 16"):
        safety_page.load(path)


def test_a_threshold_chosen_for_another_page_score_rule_is_refused_by_name(tmp_path):
    """v7's manifest has no page_score_rule: its threshold (0.686) was chosen for sqrt(window x context) alone."""
    arrays = safety_page.to_arrays(_tiny_model({}, np.zeros(safety_page.N_LEX + 1), 0.0))
    for name, manifest in (("v7.npz", {"threshold": 0.686}),
                           ("other.npz", {"threshold": 0.7, "page_score_rule": "v9"})):
        safety_page.save(tmp_path / name, arrays, manifest)
        with pytest.raises(ValueError, match=f"{name[:-4]}.json: its threshold was chosen for the page-score rule"):
            safety_page.load(tmp_path / name)
    safety_page.save(tmp_path / "ok.npz", arrays, {"threshold": 0.7, "page_score_rule": safety_page.SCORE_RULE})
    assert safety_page.load(tmp_path / "ok.npz").threshold == 0.7


def test_context_is_the_300_words_around_the_worst_window_inside_the_page():
    assert safety_page.CONTEXT == 300
    assert safety_page.context_bounds(250, 100, 200) == (0, 250)  # a shorter page is its own context
    assert safety_page.context_bounds(350, 100, 200) == (0, 300)
    assert safety_page.context_bounds(1000, 500, 600) == (400, 700)
    assert safety_page.context_bounds(1000, 0, 100) == (0, 300)
    assert safety_page.context_bounds(1000, 900, 1000) == (700, 1000)
    assert safety_page.context_bounds(100, 0, 100) == (0, 100)
    assert safety_page.context_bounds(1000, 500, 600, context=200) == (450, 650)  # v5's context


def test_one_bad_section_is_diluted_by_its_context_not_by_the_page_length():
    """The same bad passage inside safe words scores the same on a page of 367 words and of 2,807: the
    context is bounded. A page of one window is scored by that window alone."""
    lex = safety_terms.load()
    lex_weight = np.zeros(safety_page.N_LEX + 1)
    lex_weight[safety_page.EXPLICIT] = 1.0  # explicit terms of any category: a count, the same in window and context
    lex_weight[-1] = 8.0  # the peer: a mean over the words, diluted by a longer span
    model = _tiny_model({}, lex_weight, -2.0)
    bad = "you stupid fucking bitch you fucking cunt".split()
    safe = ["the", "library", "budget", "meeting"]

    def page(before: int, after: int) -> list[str]:
        return safety_terms.tokens(" ".join(safe * before + bad + safe * after), lex)

    peer = lambda toks: np.array([float(t not in safe) for t in toks])  # noqa: E731  (stand-in: 1 on the bad words)
    short, long = page(40, 50), page(400, 300)
    a = safety_page.score_tokens(short, model, lex, peer=peer(short))
    b = safety_page.score_tokens(long, model, lex, peer=peer(long))
    assert a.context_end - a.context_start == b.context_end - b.context_start == safety_page.CONTEXT
    assert a.window == pytest.approx(b.window) and a.context == pytest.approx(b.context)
    assert a.share == pytest.approx(b.share) and 0 < a.share < 1  # the same windows inside the same context
    assert a.score == pytest.approx(b.score)
    assert a.score == pytest.approx(math.sqrt(a.window * a.context) * (1 + a.share) / 2)
    assert a.context < a.window
    alone = safety_terms.tokens(" ".join(bad + safe * 20), lex)
    c = safety_page.score_tokens(alone, model, lex, peer=peer(alone))
    assert (c.start, c.end, c.context_start, c.context_end) == (0, len(alone), 0, len(alone))
    assert c.score == pytest.approx(c.window) == pytest.approx(c.context) and c.share == 1.0


def test_training_features_give_the_same_logit_as_the_scoring_path(monkeypatch):
    """A unit of up to one window: the head's decision function on the training design matrix equals
    window_logits of the PageModel the stage ships; n-grams of one source only are not features. (The
    shipped model has n-grams off, safety_train.NGRAMS; the path is kept and checked here.)"""
    monkeypatch.setattr(safety_train, "NGRAMS", True)
    units = [safety_units.Unit("you stupid fucking bitch".split() * 3, 1, "harassment", "a", False),
             safety_units.Unit("the library budget meeting".split() * 3, 0, "news", "b", False),
             safety_units.Unit("you fucking stupid bitch".split() * 4, 1, "profanity", "c", False),
             safety_units.Unit("the meeting library budget".split() * 4, 0, "health", "c", False),
             safety_units.Unit("stupid you fucking the budget".split() * 2, 1, "harassment", "b", False),
             safety_units.Unit("library meeting only here".split() * 2, 0, "news", "b", False)]
    data = safety_train.Prepared.of_units(units)
    model = safety_train.fit(data)
    assert "only" not in model.words and "here" not in model.words  # one source only
    assert "stupid" in model.words and model.uni[model.words["stupid"]] > 0 > model.uni[model.words["library"]]
    cols = safety_train.selected_columns(data)
    x = safety_train.design(data, cols)
    y = np.array([u.label for u in units])
    head = safety_train._logistic(x, y, safety_train.group_weights(y, np.array([u.source for u in units])))
    lex = safety_terms.load()
    for u, expected in zip(units, head.decision_function(x)):
        z = safety_page.window_logits(safety_page.ngram_ids(u.tokens, model), safety_page.lex_positions(u.tokens, lex),
                                      safety_page.peer_probs([u.tokens])[0], model, safety_page.window_bounds(len(u.tokens)))
        assert z.tolist() == pytest.approx([expected], abs=1e-6)
    assert model.categories == ("harassment", "profanity")
    monkeypatch.setattr(safety_train, "NGRAMS", False)
    assert safety_train.fit(data).words == {}  # term counts and the peer only


def test_peer_probabilities_are_the_blocks_of_the_page():
    from profanity_check import predict_prob

    toks = (["you", "stupid", "fucking", "idiot"] * 13)[:52] + ["the", "library", "budget"] * 30
    probs = safety_page.peer_probs([toks, [], toks[:10]])
    blocks = [" ".join(toks[i:i + 50]) for i in range(0, len(toks), 50)]
    expected = np.repeat(predict_prob(blocks), 50)[:len(toks)]
    assert probs[0].tolist() == pytest.approx(expected.tolist()) and probs[0][0] > 0.9 > 0.5 > probs[0][-1]
    assert len(probs[1]) == 0 and probs[2].tolist() == pytest.approx([predict_prob([" ".join(toks[:10])])[0]] * 10)


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


def test_threshold_never_goes_below_the_models_own_boundary(monkeypatch):
    """News and health pages the model scores low set the out-of-fold rule's threshold under 0.5; the threshold is
    then FLOOR (0.5): no page the model calls more likely safe than not drops."""
    harsh = "you stupid fucking bitch".split()
    calm = "the library budget meeting".split()
    units = [safety_units.Unit(harsh * 15, 1, "harassment", s, False) for s in ("a", "b", "c") for _ in range(4)]
    safe = (("n", "news"), ("h", "health"))
    units += [safety_units.Unit(calm * 15, 0, cat, s, False) for s, cat in safe for _ in range(4)]
    pages = [safety_units.Unit(calm * 20, 0, cat, s, True) for s, cat in safe for _ in range(3)]
    data = safety_train.Prepared.of_units(units, pages)
    monkeypatch.setattr(safety_train, "FLOOR", 0.0)
    low, _ = safety_train.train_on(data, log=lambda m: None)
    assert low.threshold < 0.5  # the rule alone: the highest out-of-fold page score, all of them low
    monkeypatch.setattr(safety_train, "FLOOR", 0.5)
    floored, _ = safety_train.train_on(data, log=lambda m: None)
    assert floored.threshold == 0.5 and safety_train.FLOOR == 0.5
