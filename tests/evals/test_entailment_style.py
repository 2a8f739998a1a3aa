"""The style-calibration evaluation's fitting rules, on small sets whose answers are worked out by hand:
a threshold linear in coverage, the batch percentile, the threshold from a batch's median coverage, the
group-wise hold-out, and the columns built from a labelled set (no model: per-sentence scores are given)."""

from __future__ import annotations

import numpy as np
import pytest

from evals.data.entailment_style import (StyleSet, batch_median_threshold, batch_percentile, candidates,
                                         fit_linear_threshold, leave_one_group_out, style_sets)
from synth.summaries import aggregator
from synth.summaries.entailment import Labelled, load_scorer


def _set(name, group, fused, cov):
    return StyleSet(name, group, np.array([1, 0]), {"fused": np.array(fused), "bigram_cov": np.array(cov)})


# an extractive set (coverage 0.9) and an abstractive one (0.2): consistent summary first, then inconsistent
EXTRACTIVE = _set("ext", "ext", [0.95, 0.80], [0.9, 0.9])
ABSTRACTIVE = _set("abs", "abs", [0.36, 0.15], [0.2, 0.2])


def test_batch_percentile_shares_tied_ranks():
    # ranks 1, 2.5, 2.5, 4 (the two 0.5s share ranks 2 and 3) over a batch of 4
    assert batch_percentile(np.array([0.5, 0.2, 0.9, 0.5])).tolist() == [0.625, 0.25, 1.0, 0.625]


def test_linear_threshold_separates_two_styles_that_one_threshold_cannot():
    # keep when fused - b*cov >= a. Both consistent summaries must beat both inconsistent ones:
    # 0.36 - 0.2b > 0.80 - 0.9b  <=>  b > 0.643, and 0.95 - 0.9b > 0.15 - 0.2b  <=>  b < 1.143.
    # The smallest slope of the grid that does it is 0.7; the scores are then 0.32, 0.17 (ext) and 0.22, 0.01
    # (abs), and the lowest threshold that keeps exactly the consistent two is 0.22.
    b, a = fit_linear_threshold([EXTRACTIVE, ABSTRACTIVE], "fused", "bigram_cov")
    assert b == pytest.approx(0.7) and a == pytest.approx(0.22)


def test_batch_median_threshold_is_the_line_through_the_training_sets_best_thresholds():
    # own best thresholds: 0.95 at median coverage 0.9, 0.36 at 0.2; at 0.5 the line gives 0.36 + 0.3 * 0.59 / 0.7
    test = _set("new", "new", [0.5, 0.4], [0.5, 0.5])
    assert batch_median_threshold([EXTRACTIVE, ABSTRACTIVE], test, "fused", "bigram_cov") == pytest.approx(
        0.36 + 0.3 * 0.59 / 0.7)


def test_hold_out_leaves_the_whole_group_out():
    # a second abstractive set in the same group: holding out either one trains on the extractive set alone, whose
    # threshold (0.95) keeps neither abstractive summary (BA 0.5 at AUC 1.0); holding out the extractive set trains
    # on the abstractive group (threshold 0.36), which keeps both extractive summaries (BA 0.5)
    twin = _set("abs2", "abs", [0.36, 0.15], [0.2, 0.2])
    res = leave_one_group_out([EXTRACTIVE, ABSTRACTIVE, twin], candidates()["shipped fused"])
    assert res == [(1.0, 0.5), (1.0, 0.5), (1.0, 0.5)]


def test_style_columns_score_the_shipped_way():
    doc = "The council approved the budget on Tuesday. The mayor said it would cost 40,000 dollars a year."
    summaries = ["The council approved the budget on Tuesday.", "The mayor cut the budget. It costs nothing."]
    data = Labelled("toy", [doc, doc], summaries, np.array([1, 0]))
    per = [np.array([1.0]), np.array([0.0, 0.5])]
    from synth.summaries.features import feature_matrix

    (s,) = style_sets([data], {"toy": per}, {"toy": feature_matrix(data.documents, data.summaries)})
    support = load_scorer().score_pairs(data.documents, summaries)
    assert s.col["nli_mean"].tolist() == [1.0, 0.25]
    assert np.allclose(s.col["fused"], aggregator.load().score(per, support))  # the shipped aggregator is fused
    assert s.col["bigram_cov"][0] == 1.0  # copied word for word
    assert np.allclose(s.col["log_sentences"], np.log([1, 2]))
    assert s.col["fused_percentile"].tolist() == [1.0, 0.5]
