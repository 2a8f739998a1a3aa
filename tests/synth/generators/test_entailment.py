"""The summary entailment filter: support features, the scorer and filter on real payload text, the
LLM judge with a scripted backend, and the leave-one-dataset-out evaluation on SummaC (shared data)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from synth.backends.scripted import ScriptedBackend
from synth.generation.llm import register_backend
from synth.summaries.entailment import (FEATURE_NAMES, Labelled, auc, balanced_accuracy, calibrate, judge_scores,
                                        leave_one_dataset_out, load_scorer)
from synth.summaries.features import extrinsic_free, feature_matrix, is_specific, tokens
from synth.stages.summaries_filters import EntailmentFilter, EntailmentScore

DOC = ("The city library will open at 8 am on Saturdays from March. The council approved the budget on Tuesday. "
       "Mayor Ortiz said the change would cost 40,000 dollars a year.\n\nIn other news, the museum in Lyon is closed.")


def test_tokens_map_number_words_and_separators():
    assert tokens("Three dogs cost 40,000 Dollars") == ["3", "dogs", "cost", "40000", "dollars"]
    assert is_specific("ortiz") and is_specific("40000") and not is_specific("library")


def test_support_features():
    supported, moved, invented = feature_matrix([DOC] * 3, [
        "The city library will open at 8 am on Saturdays.",  # copied: fully supported
        "The library in Lyon will open at 8 am.",  # every word is in the document, not in this order
        "Mayor Fischer said it would cost 90 dollars."])  # an invented name and number
    assert supported.tolist() == [1.0, 1.0, 1.0]
    assert moved[0] == 1.0 and moved[1] < 0.5  # words all found, trigrams mostly not
    assert invented[2] <= 0.5 and invented[0] < 1.0  # the specifics are not in the document
    for x in (moved, invented):
        assert x.shape == (len(FEATURE_NAMES),) and np.all((0 <= x) & (x <= 1))


def test_swapped_context_scores_below_faithful():
    faithful, moved, invented = feature_matrix([DOC] * 3, [
        "Mayor Ortiz said the change would cost 40,000 dollars a year.",
        "Mayor Ortiz said the museum in Lyon would cost 40,000 dollars a year.",
        "Mayor Fischer said the change would cost 90,000 dollars a year."]).mean(axis=1)
    assert faithful > moved and faithful > invented


def test_extrinsic_free_flags_invented_names_and_numbers_only():
    # a paraphrase that keeps the document's name and number has no extrinsic word
    assert extrinsic_free(DOC, "Ortiz, the mayor, put the yearly bill at 40,000 dollars.") == 1.0
    assert extrinsic_free(DOC, "Mayor Fischer said it would cost 40,000 dollars.") == 0.0  # invented rare name
    assert extrinsic_free(DOC, "The library opens at 9 am on Saturdays.") == 0.0  # invented number
    # "forty thousand" reads as the numbers 40 and 1000, which the document lacks: numbers must match exactly
    assert extrinsic_free(DOC, "Mayor Ortiz expects a yearly cost of forty thousand dollars.") == 0.0
    # a name too frequent to be rare (Zipf >= 3.5) still counts when capitalised inside a sentence
    assert extrinsic_free(DOC, "The library will open, said Jordan.") == 0.0
    assert extrinsic_free(DOC, "The museum in Lyon will open at 8 am.") == 1.0  # an intrinsic error: not seen


def test_filter_keeps_supported_and_drops_made_up_summary():
    t = pa.table({"payload": [DOC, DOC],
                  "summary": ["The city library will open at 8 am on Saturdays from March.",
                              "The museum in Berlin will close for 12 weeks after a 40 million euro fire."]})
    scored = EntailmentScore({"method": "support"})(t).table
    s = scored.column("entail__score").to_pylist()
    assert s == scored.column("entail__support").to_pylist() and "entail__sentences" not in scored.schema.names
    assert s[0] > load_scorer().threshold > s[1]
    res = EntailmentFilter({"method": "support"})(scored)
    assert res.stats.dropped == {"not_entailed": 1}
    assert res.table.column("summary").to_pylist() == ["The city library will open at 8 am on Saturdays from March."]


def test_llm_judge_averages_sentence_verdicts():
    def reply(req, i):
        sentence = req.messages[-1]["content"].split("Sentence:\n")[1].split("\n")[0]
        return "Yes." if "library" in sentence else "no"

    backend = ScriptedBackend(reply)
    two = "The library opens at 8 am. The museum burned down."
    assert judge_scores(backend, [DOC, DOC], ["The library opens at 8 am.", two]).tolist() == [1.0, 0.5]
    assert backend.calls == 2  # three sentences, two distinct requests (identical ones are asked once)

    register_backend("judge-test", ScriptedBackend(lambda req, i: "maybe"))  # unparseable = not supported
    out = EntailmentScore({"method": "support", "llm_judge": {"backend": {"kind": "registered", "name": "judge-test"}}})(
        pa.table({"payload": [DOC], "summary": ["The city library will open at 8 am on Saturdays."]})).table
    assert out.column("entail__llm_score").to_pylist() == [0.0]
    assert out.column("entail__score").to_pylist() == [pytest.approx(0.5)]  # (1.0 support + 0.0 judge) / 2


def test_metrics_against_hand_computation():
    y = np.array([1, 1, 0, 0, 1])
    s = np.array([0.9, 0.4, 0.4, 0.1, 0.8])
    # pairs (pos, neg): (0.9,0.4)=1 (0.9,0.1)=1 (0.4,0.4)=0.5 (0.4,0.1)=1 (0.8,0.4)=1 (0.8,0.1)=1 -> 5.5/6
    assert auc(y, s) == pytest.approx(5.5 / 6)
    assert balanced_accuracy(y, (s >= 0.5).astype(int)) == pytest.approx((2 / 3 + 1) / 2)


def test_calibration_weights_groups_equally():
    a = (np.array([0.6, 0.8, 0.2, 0.3]), np.array([1, 1, 0, 0]))    # perfect for t in (0.3, 0.6]
    b = (np.array([0.9, 0.95, 0.62, 0.66]), np.array([1, 1, 0, 0]))  # perfect for t in (0.66, 0.9]
    scores, labels = [a[0], a[0], b[0]], [a[1], a[1], b[1]]
    # two copies of one group count once: t=0.8 gives (0.75 + 1.0) / 2 over groups, the best
    assert calibrate(scores, labels, ["a", "a", "b"]) == pytest.approx(0.8)
    # counted as three datasets, the two copies win: t=0.6 gives (1 + 1 + 0.5) / 3
    assert calibrate(scores, labels, ["a1", "a2", "b"]) == pytest.approx(0.6)
    rows = leave_one_dataset_out([Labelled("a1", [], [], a[1], "a"), Labelled("b", [], [], b[1])],
                                 lambda d: a[0] if d.name == "a1" else b[0])
    assert [(r["dataset"], r["threshold"], r["balanced_acc"]) for r in rows] == [
        ("a1", pytest.approx(0.9), 0.5), ("b", pytest.approx(0.6), 0.5)]  # each other's threshold fails


@pytest.mark.slow
def test_leave_one_dataset_out_on_summac(shared_data):
    from evals.data.entailment import load_datasets

    datasets = load_datasets(shared_data / "summarization")
    assert [d.name for d in datasets] == ["factcc", "summeval", "xsumfaith", "polytope", "xsum_hallucination"]
    assert len(datasets[-1].labels) > 2000 and datasets[-1].group == datasets[2].group == "xsum"
    scorer = load_scorer()
    rows = {r["dataset"]: r for r in leave_one_dataset_out(datasets, lambda d: scorer.score_pairs(d.documents, d.summaries))}
    # the ranking holds on the held-out news datasets (the old fitted model: AUC 0.48 on one unseen set)
    for name in ("factcc", "summeval", "xsumfaith", "xsum_hallucination"):
        assert rows[name]["auc"] > 0.7, rows[name]
    # the shipped artifact records these same leave-one-out results
    saved = {r["dataset"]: r for r in scorer.info["leave_one_dataset_out"]}
    for name, r in rows.items():
        assert saved[name]["auc"] == pytest.approx(r["auc"], abs=1e-9)


def test_polytope_faithfulness_label_and_bad_records(tmp_path):
    import json

    from evals.data.entailment import polytope_faithfulness

    folder = tmp_path / "summac_subsets"
    folder.mkdir()
    recs = {"a": {"document": "d1", "claim": "c1", "label": 0, "inaccuracy_label": 1},   # omission only
            "b": {"document": "d2", "claim": "c2", "label": 0, "inaccuracy_label": 0},   # misstates its source
            "c": {"document": "d3", "claim": "c3", "label": 1, "inaccuracy_label": "1"}}
    (folder / "polytope.json").write_text(json.dumps(recs))
    d = polytope_faithfulness(tmp_path)
    assert (d.summaries, d.labels.tolist(), d.group) == (["c1", "c2", "c3"], [1, 0, 1], "polytope")
    recs["b"]["inaccuracy_label"] = None
    (folder / "polytope.json").write_text(json.dumps(recs))
    with pytest.raises(ValueError, match=r"polytope.json: record b has inaccuracy_label None"):
        polytope_faithfulness(tmp_path)
    with pytest.raises(FileNotFoundError, match="pass --data"):
        polytope_faithfulness(tmp_path / "missing")


@pytest.mark.slow
def test_polytope_faithfulness_errors_are_ranked(shared_data):
    """On Polytope's overall label (any error, omissions included) support ranks at chance; on its
    faithfulness label (SummaC's inaccuracy label) the same score, at the threshold calibrated without
    Polytope, separates the summaries that misstate their source."""
    from evals.data.entailment import load_datasets, polytope_faithfulness, supplementary_row

    folder = shared_data / "summarization"
    datasets = load_datasets(folder)
    scorer = load_scorer()
    scorers = {"ours": lambda d: scorer.score_pairs(d.documents, d.summaries)}
    lodo = {"ours": leave_one_dataset_out(datasets, scorers["ours"])}
    extra = polytope_faithfulness(folder)
    assert len(extra.labels) == 634 and int((extra.labels == 0).sum()) == 77
    row = supplementary_row(extra, {"ours": scorers["ours"](extra)}, lodo, datasets)
    assert row["ours AUC"] > 0.85 and row["ours BA"] > 0.75, row
    assert lodo["ours"][3]["dataset"] == "polytope" and lodo["ours"][3]["auc"] < 0.6


def test_labelled_pairs_bad_lines_are_named(tmp_path):
    from manifests.errors import RecordError, ShardError
    from synth.summaries.entailment import read_labelled_pairs

    good = {"document": DOC, "summary": "The library opens at 8 am on Saturdays.", "label": 1}
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join([json_line(good), "", json_line({"payload": DOC, "summary": "x", "label": 0})]) + "\n")
    docs, summaries, labels = read_labelled_pairs(path)
    assert (docs, summaries, labels.tolist()) == ([DOC, DOC], [good["summary"], "x"], [1, 0])
    cases = [("{not json", "line 2", "not JSON"),
             (json_line({"document": DOC, "label": 1}), "line 2", "summary must be a non-empty string"),
             (json_line({"summary": "s", "label": 1}), "line 2", "document \\(or payload\\) must be"),
             (json_line({**good, "label": 2}), "line 2", "label must be 1 \\(consistent\\) or 0 \\(not\\); got 2"),
             (json_line({**good, "label": True}), "line 2", "label must be .*; got True"),
             (json_line({**good, "label": "1"}), "line 2", "label must be .*; got '1'"),
             ("[1, 2]", "line 2", "expected a JSON object, got list")]
    for bad, where, reason in cases:
        path.write_text(json_line(good) + "\n" + bad + "\n")
        with pytest.raises(RecordError, match=rf"pairs.jsonl \[{where}\]: {reason}"):
            read_labelled_pairs(path)
    with pytest.raises(ShardError, match="cannot read labelled pairs"):
        read_labelled_pairs(tmp_path / "missing.jsonl")


def json_line(rec: dict) -> str:
    import json

    return json.dumps(rec)


def test_calibrate_on_pairs_separable_and_too_few():
    from manifests.errors import ConfigError
    from synth.summaries.entailment import calibrate_on_pairs

    docs = [f"document {i // 2}" for i in range(40)]  # two pairs per document
    labels = np.array([1, 0] * 20)
    scores = np.where(labels == 1, [0.6, 0.7, 0.8, 0.6] * 10, [0.1, 0.2, 0.3, 0.3] * 10)
    r = calibrate_on_pairs(scores, labels, docs, folds=4, shipped_threshold=0.9)
    # separable: the lowest perfect cut is the lowest positive, every fold's cut lies in the gap, so the
    # out-of-fold predictions are all right
    assert r["threshold"] == 0.6 and all(0.3 < t <= 0.7 for t in r["fold_thresholds"])
    assert r["balanced_acc_cross_validated"] == r["balanced_acc_in_sample"] == 1.0
    # the shipped 0.9 keeps nothing here: every positive is missed
    assert (r["balanced_acc_at_shipped"], r["kept_at_shipped"], r["kept_at_threshold"]) == (0.5, 0.0, 0.5)
    assert len(r["fold_thresholds"]) == 4  # 20 documents hash into all four folds
    with pytest.raises(ConfigError, match="at least 5 consistent and 5 inconsistent pairs"):
        calibrate_on_pairs(scores[:8], labels[:8], docs[:8], folds=5, shipped_threshold=0.9)
    with pytest.raises(ConfigError, match="--folds must be at least 2"):
        calibrate_on_pairs(scores, labels, docs, folds=1, shipped_threshold=0.9)


def test_entailment_threshold_command(tmp_path, capsys):
    import json

    from manifests.main import main

    rows = []
    for i in range(6):
        doc = DOC.replace("Ortiz", f"Ortiz{i}")
        rows += [{"document": doc, "summary": f"Mayor Ortiz{i} said the change would cost 40,000 dollars a year.", "label": 1},
                 {"document": doc, "summary": f"Mayor Ortiz{i} said the museum in Paris will cost 9 million euros.", "label": 0}]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["synth", "entailment-threshold", str(path), "--folds", "3", "--method", "support", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert (r["n"], r["n_consistent"], r["auc"], r["balanced_acc_cross_validated"]) == (12, 6, 1.0, 1.0)
    assert r["method"] == "support"
    assert main(["synth", "entailment-threshold", str(path), "--folds", "3", "--method", "support"]) == 0
    out = capsys.readouterr().out
    assert f"summary_entailment_filter_v2: {{method: support, threshold: {r['threshold']:.4f}}}" in out
    path.write_text(path.read_text() + '{"document": "d", "summary": "s", "label": "yes"}\n')
    assert main(["synth", "entailment-threshold", str(path)]) != 0
    assert "pairs.jsonl [line 13]: label must be 1" in capsys.readouterr().err


@pytest.mark.slow
def test_calibrating_on_abstractive_summaries_recovers_them(shared_data):
    """The shipped threshold (calibrated on CNN/DM-heavy SummaC) keeps almost no XSum summary, faithful or
    not; calibrated on XSum's own labelled pairs, the out-of-fold balanced accuracy rises well above 0.5."""
    from evals.data.entailment import load_datasets
    from synth.summaries.entailment import calibrate_on_pairs

    xsum = next(d for d in load_datasets(shared_data / "summarization") if d.name == "xsum_hallucination")
    scorer = load_scorer()
    r = calibrate_on_pairs(scorer.score_pairs(xsum.documents, xsum.summaries), xsum.labels, xsum.documents,
                           shipped_threshold=scorer.threshold)
    assert r["kept_at_shipped"] < 0.02 and r["balanced_acc_at_shipped"] < 0.52
    assert r["balanced_acc_cross_validated"] > 0.62 and r["threshold"] < 0.6, r


def test_calibration_refuses_folds_without_both_labels():
    from manifests.errors import ConfigError
    from synth.summaries.entailment import calibrate_on_pairs

    # every pair shares one document, so one fold holds them all and the rest of the data is empty
    labels = np.array([1, 0] * 10)
    with pytest.raises(ConfigError, match="fewer than two labels; folds are split by document"):
        calibrate_on_pairs(np.linspace(0, 1, 20), labels, ["one document"] * 20, folds=3, shipped_threshold=0.5)
