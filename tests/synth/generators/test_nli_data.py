"""NLI training data for the entailment model: binary labels, long premises cut, SummEdits by sentence,
the hash hold-out, and the errors on bad rows (small hand-made files)."""

from __future__ import annotations

import gzip
import json

import pytest

from synth.summaries.nli_data import best_window, is_heldout, read_folder, read_source
from synth.summaries.nli_train import batch_order, training_pairs


def _write(path, rows):
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for r in rows:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")


def _row(i, premise, hypothesis, label, scheme="3way"):
    return {"id": f"x:{i}", "premise": premise, "hypothesis": hypothesis, "label": label, "scheme": scheme,
            "split": "test", "orig_label": label}


def test_labels_are_made_binary(tmp_path):
    _write(tmp_path / "mnli.jsonl.gz", [_row(0, "A dog runs.", "An animal runs.", "entailment"),
                                        _row(1, "A dog runs.", "A cat sleeps.", "neutral"),
                                        _row(2, "A dog runs.", "No dog runs.", "contradiction"),
                                        _row(3, "A dog runs.", "A dog moves.", "not_entailment", "binary")])
    pairs = read_source(tmp_path / "mnli.jsonl.gz", holdout_fraction=0.0)
    assert [(p.id, p.label, p.source, p.heldout) for p in pairs] == [
        ("x:0", 1, "mnli", False), ("x:1", 0, "mnli", False), ("x:2", 0, "mnli", False), ("x:3", 0, "mnli", False)]


def test_bad_rows_name_file_line_and_reason(tmp_path):
    path = tmp_path / "bad.jsonl.gz"
    _write(path, [_row(0, "A.", "B.", "entailment"), _row(1, "A.", "B.", "maybe")])
    with pytest.raises(ValueError, match=r"bad.jsonl.gz: line 2: label 'maybe' is none of"):
        read_source(path, holdout_fraction=0.0)
    _write(path, [_row(0, "A.", "B.", "entailment"), "{not json"])
    with pytest.raises(ValueError, match=r"bad.jsonl.gz: line 2: not JSON"):
        read_source(path, holdout_fraction=0.0)
    _write(path, [_row(0, "  ", "B.", "entailment")])
    with pytest.raises(ValueError, match=r"bad.jsonl.gz: line 1: premise must be a non-empty string"):
        read_source(path, holdout_fraction=0.0)
    with pytest.raises(FileNotFoundError, match="no \\*.jsonl.gz files"):
        read_folder(tmp_path / "empty")


def test_long_premise_is_cut_to_the_sentences_sharing_most_words():
    filler = " ".join(f"Filler sentence number {i} talks about weather." for i in range(30))
    doc = f"The mayor opened the bridge on Monday. {filler} The bridge cost four million pounds."
    window = best_window(doc, "The bridge cost the mayor four million pounds.", max_words=14)
    # the two bridge sentences share most words with the hypothesis; they come back in document order
    assert window == "The mayor opened the bridge on Monday. The bridge cost four million pounds."


def test_summedits_sentences_take_the_label_they_can_be_given(tmp_path):
    doc = "Sales rose 5% in May. The firm hired ten people. " * 2
    _write(tmp_path / "summedits.jsonl.gz", [
        _row(0, doc, "Sales rose 5% in May. The firm hired ten people.", "entailment", "binary"),
        _row(1, doc, "Sales rose 5% in May. The firm fired ten people.", "not_entailment", "binary")])
    pairs = read_source(tmp_path / "summedits.jsonl.gz", holdout_fraction=0.0)
    # the edited summary's first sentence also occurs in a consistent summary: consistent; the edited one is not
    assert [(p.hypothesis, p.label) for p in pairs] == [
        ("Sales rose 5% in May.", 1), ("The firm hired ten people.", 1),
        ("Sales rose 5% in May.", 1), ("The firm fired ten people.", 0)]
    assert [p.id for p in pairs] == ["x:0#0", "x:0#1", "x:1#2", "x:1#3"]


def test_holdout_is_by_premise_and_stable():
    premises = [f"Premise number {i} about something." for i in range(2000)]
    held = [p for p in premises if is_heldout(p, 0.05)]
    assert 60 < len(held) < 140  # about 5%
    # the same premise, however spaced or cased, falls on the same side
    assert all(is_heldout(p.upper().replace(" ", "  "), 0.05) for p in held)


def test_caps_and_batch_order_are_seeded(tmp_path):
    _write(tmp_path / "a.jsonl.gz", [_row(i, f"P {i}.", "H.", "entailment") for i in range(50)])
    pairs, hashes = read_folder(tmp_path, holdout_fraction=0.0)
    assert list(hashes) == ["a.jsonl.gz"] and len(hashes["a.jsonl.gz"]) == 64
    picked = training_pairs(pairs, {"a": 10}, seed=3)
    assert len(picked) == 10 and picked == training_pairs(pairs, {"a": 10}, seed=3)
    lengths = [5, 50, 6, 48, 7, 49, 5, 51]
    batches = batch_order(lengths, 2, 1.0, seed=0)
    assert sorted(i for b in batches for i in b) == list(range(8))  # every pair once per epoch
    assert batches == batch_order(lengths, 2, 1.0, seed=0)  # a resumed run sees the same batches
    assert all(abs(lengths[b[0]] - lengths[b[-1]]) <= 2 for b in batches)  # similar lengths together
    assert len(batch_order(lengths, 2, 1.5, seed=0)) == 6  # one and a half epochs of four batches
