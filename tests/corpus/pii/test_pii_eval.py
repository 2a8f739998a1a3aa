"""The PII evaluation's own pieces (evals/data/pii.py): its scoring rule, its labels, its planted
code. Reads ../shared/data through the `shared_data` fixture."""

from __future__ import annotations

import json
import random
from pathlib import Path

from evals.data import _pii_code, _pii_sets, pii


def test_score_counts_partial_hits_as_misses_and_every_other_detection_against_precision():
    truths = [[(10, 22, "phone"), (30, 40, "email")]]
    detections = [[(10, 18, "phone"), (30, 40, "email"), (50, 55, "phone")]]  # 8/12 of the phone: not found
    stats = pii.score(truths, detections, ("phone", "email"))
    assert stats["phone"] == {"truths": 1, "found": 0, "detections": 2, "correct": 1}
    assert stats["email"] == {"truths": 1, "found": 1, "detections": 1, "correct": 1}


def test_real_text_labels_occur_in_their_documents(shared_data):
    labels = json.loads(pii.LABELS.read_text(encoding="utf-8"))
    docs = dict(pii.real_docs())
    for doc_id, values in labels["text"].items():
        for category, value in values:
            assert category in pii.TEXT_CATEGORIES and value in docs[doc_id], (doc_id, value)
    spans = pii.label_spans(list(docs.items()), labels["text"])
    assert sum(map(len, spans)) == sum(len(v) for v in labels["text"].values())  # each value once


def test_planted_sets_are_what_they_say(shared_data):
    docs = _pii_sets.build_formats(0)
    for text, spans in docs[:50]:
        for start, end, category in spans:
            value = text[start:end]
            assert value.strip() == value and any(c.isdigit() or c == "@" for c in value), (category, value)
    carriers = _pii_code.carriers(shared_data, Path(pii.REPO) / "data" / "samples" / "code" / "repos")
    assert len(carriers) >= 100
    name, text = carriers[0]
    planted, positives, negatives = _pii_code.plant(text, _pii_code.LANG[Path(name).suffix], random.Random(1), 4, 2)
    assert len(positives) == 4 and len(negatives) == 2
    for start, end, family in positives:
        assert planted[start:end] and planted[start:end] not in text


def test_creddata_line_score_counts_rows_hit_on_either_side():
    from evals.data import _pii_creddata as cd

    text = "a = 1\npassword = 'x7Gq2'\ntitle = 'Name'\nkey: |\n  AAAA\n  BBBB\nend\n"
    files = [cd.CredFile("f", "r", ".py", text)]
    rows = [cd.Row(0, 2, 2, "T", "Password", 12, 17),  # the password value on line 2
            cd.Row(0, 3, 3, "F", "Key", -1, -1),
            cd.Row(0, 5, 6, "T", "PEM Private Key", 2, -1),  # a two-line value
            cd.Row(0, 1, 1, "X", "Other", -1, -1)]
    second = text.index("AAAA")
    # one span on line 2 covering the value, one on line 3 (a false hit), one on the first line of the block,
    # one on line 7 that nobody labelled
    det = [[(text.index("x7Gq2"), text.index("x7Gq2") + 5), (text.index("Name"), text.index("Name") + 4),
            (second, second + 4), (text.index("end"), text.index("end") + 3)]]
    r = cd.score(files, rows, det)
    assert (r["T"], r["T_hit"], r["T_value"], r["FX"], r["FX_hit"], r["unlabelled_lines"]) == (2, 2, 1, 2, 1, 1)
    assert r["recall"] == 1.0 and r["false_hit_rate"] == 0.5 and r["value_recall"] == 0.5
    assert cd.score(files, rows, [[]])["recall"] == 0.0


def test_threshold_rule_leaves_the_most_room_to_both_goals_in_the_worst_group():
    """Issue 39: the goals (recall >= 0.90, false hits <= 0.05) hold per group of repositories, so the threshold
    is the one whose worst group is furthest inside both; a pooled budget would let a quiet group pay for a noisy one."""
    from evals.data.pii_secret_train import choose_threshold, choose_threshold_by_group

    # (threshold, recall, false-hit rate) of two groups on the same three thresholds
    quiet = [(0.1, 0.99, 0.01), (0.2, 0.98, 0.005), (0.3, 0.95, 0.0)]
    noisy = [(0.1, 0.97, 0.08), (0.2, 0.95, 0.06), (0.3, 0.93, 0.03)]
    # slack per threshold: min(0.05 - worst false hits, worst recall - 0.90) = -0.03, -0.01, 0.02
    assert choose_threshold_by_group([quiet, noisy]) == 0.3
    # past the false-hit goal, recall becomes the tighter side: the slack falls again
    tight = [(0.1, 0.95, 0.02), (0.2, 0.92, 0.01), (0.3, 0.91, 0.0)]
    assert choose_threshold_by_group([tight, quiet]) == 0.1  # slack 0.03, 0.02, 0.01
    # the pooled rule on the two groups' mean (0.045, 0.0325, 0.015) takes 0.2, where the noisy group is at 0.06
    pooled = [(a[0], (a[1] + b[1]) / 2, (a[2] + b[2]) / 2) for a, b in zip(quiet, noisy)]
    assert choose_threshold(pooled, budget=0.04) == 0.2
