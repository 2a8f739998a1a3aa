"""Summary consistency with the entailment model: document windows, candidate windows, the lexical first
pass, per-sentence best-window scores (with a stand-in model where the arithmetic is checked by hand),
the aggregators, the int8 weight format, and the shipped model itself on pairs whose answer is plain."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from synth.summaries import aggregator, consistency, nli_model
from synth.summaries.aggregator import Aggregator, features, fit_logistic, leave_one_group_out
from synth.summaries.consistency import (ConsistencySettings, candidate_windows, first_pass, sentence_scores,
                                         summary_sentences)

DOC = ("The city library will open at 8 am on Saturdays from March. The council approved the budget on Tuesday. "
       "Mayor Ortiz said the change would cost 40,000 dollars a year. Readers had asked for longer hours. "
       "The museum in Lyon is closed for repairs.")


def test_windows_and_candidates():
    windows, words, _ = consistency._document(DOC, 2)
    assert len(windows) == 4 and windows[0] == ("The city library will open at 8 am on Saturdays from March. "
                                                "The council approved the budget on Tuesday.")
    s = ConsistencySettings(window_sentences=2, candidates=2)
    # "ortiz" is specific (weight 2) and "cost" shared: windows 1 and 2 hold the mayor's sentence; ties go first
    assert candidate_windows(DOC, "Ortiz put the cost at a lot.", s) == [1, 2]
    assert candidate_windows(DOC, "Lyon's museum shut.", s) == [3, 0]  # "lyon", "museum" only in the last window
    assert consistency._document("One sentence only", 3)[0] == ["One sentence only"]


def test_first_pass_settles_copies_and_extrinsic_names():
    assert first_pass(DOC, "Mayor Ortiz said the change would cost 40,000 dollars a year.") == (1.0, "copied")
    assert first_pass(DOC, "mayor ortiz said the change would cost 40000 dollars") == (1.0, "copied")  # normalised
    assert first_pass(DOC, "Mayor Fischer opened the library.") == (0.0, "extrinsic")  # a name the document lacks
    assert first_pass(DOC, "The library opens at 9 am.") == (0.0, "extrinsic")  # a number it lacks
    assert first_pass(DOC, "The council approved the library budget.") is None  # for the model to judge
    assert first_pass(DOC, "Readers had asked.") is None  # too short to count as a copy


def test_sentence_scores_take_the_best_candidate(monkeypatch):
    seen = []

    def words(text):
        return set(re.findall(r"\w+", text.lower()))

    def fake_logits(net, tok, premises, hypotheses, **kw):  # logit = 2 * (words shared) - 6
        seen.extend(zip(premises, hypotheses))
        return np.array([2.0 * len(words(p) & words(h)) - 6 for p, h in zip(premises, hypotheses)])

    monkeypatch.setattr(nli_model, "predict_logits", fake_logits)
    summaries = ["The council approved the library budget. Mayor Fischer opened the library.",
                 "Mayor Ortiz said the change would cost 40,000 dollars a year."]
    s = ConsistencySettings(window_sentences=1, candidates=2)
    per, by_model, counts = sentence_scores([DOC, DOC], summaries, s, model=(None, None))
    assert counts == {"model_sentences": 1, "extrinsic": 1, "copied": 1, "model_pairs": 2,
                      "model_bf16": int(nli_model.bf16_supported())}
    assert [m.tolist() for m in by_model] == [[True, False], [False]]
    # candidates for "the council approved the library budget.": sentence 1 (council, approved, budget) and
    # sentence 0 (library); words shared: the, council, approved, budget -> logit 2; the, library -> -2
    assert [p for p, _ in seen] == ["The council approved the budget on Tuesday.",
                                    "The city library will open at 8 am on Saturdays from March."]
    assert per[0].tolist() == [pytest.approx(1 / (1 + np.exp(-2.0))), 0.0] and per[1].tolist() == [1.0]
    # without the first pass every sentence goes to the model
    _, by_model, counts = sentence_scores([DOC], summaries[:1], ConsistencySettings(first_pass=False),
                                          model=(None, None))
    assert by_model[0].tolist() == [True, True] and "extrinsic" not in counts


def test_summary_sentences_and_settings_errors():
    assert summary_sentences("One. Two!  Three?") == ["One.", "Two!", "Three?"]
    assert summary_sentences("...") == ["..."]  # no words: the text itself, so every summary has a sentence
    with pytest.raises(ValueError, match="candidates must be >= 1"):
        ConsistencySettings(candidates=0)


def test_aggregator_features_and_kinds():
    per = [np.array([1.0, 0.3, 0.05]), np.array([0.5])]
    x = features(per)
    assert x[0].tolist() == pytest.approx([0.45, 0.05, 1 / 3, 1 / 3, 0, 0, 1 / 3])
    assert x[1].tolist() == pytest.approx([0.5, 0.5, 0, 0, 1, 0, 0])  # 0.5 falls in [0.4, 0.6)
    assert Aggregator("mean", threshold=0.4).score(per).tolist() == pytest.approx([0.45, 0.5])
    assert Aggregator("min").score(per).tolist() == pytest.approx([0.05, 0.5])
    # fused: the mean of the per-sentence scores averaged with each summary's lexical support score
    assert Aggregator("fused").score(per, np.array([0.85, 0.1])).tolist() == pytest.approx([0.65, 0.3])
    with pytest.raises(ValueError, match="needs the lexical support score of each of the 2 summaries; got None"):
        Aggregator("fused").score(per)
    with pytest.raises(ValueError, match="of each of the 2 summaries; got 1"):
        Aggregator("fused").score(per, np.array([0.5]))
    with pytest.raises(ValueError, match="learned aggregator needs 7 weights"):
        Aggregator("learned", coef=[1.0])
    with pytest.raises(ValueError, match="kind must be one of"):
        Aggregator("max")


def test_learned_aggregator_fits_and_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    good = [rng.uniform(0.6, 1.0, size=2) for _ in range(40)]
    bad = [np.array([rng.uniform(0.6, 1.0), rng.uniform(0.0, 0.3)]) for _ in range(40)]
    labels = [np.array([1] * 40 + [0] * 40)]
    agg = Aggregator("learned", coef=[0.0] * 7).fit([good + bad], labels, ["g"])
    s = agg.score(good + bad)
    assert s[:40].min() > agg.threshold >= s[40:].max()  # separable by the minimum: the fit finds it
    assert agg.coef[1] > 0  # the weight on the minimum
    path = tmp_path / "m.json"
    aggregator.save(agg, path)
    again = aggregator.load(path)
    assert again.score(good + bad).tolist() == pytest.approx(s.tolist())
    bad_json = json.loads(path.read_text()) | {"features": ["mean"]}
    path.write_text(json.dumps(bad_json))
    with pytest.raises(ValueError, match="do not match the code's"):
        aggregator.load(path)


def test_logistic_fit_matches_closed_form_for_one_feature():
    # two points, one feature, no penalty: the fit drives the classes apart, signs as expected
    coef, bias = fit_logistic(np.array([[0.0], [1.0], [0.0], [1.0]]), np.array([0.0, 1.0, 0.0, 1.0]),
                              np.ones(4), l2=1.0)
    assert coef[0] > 0 and bias < 0


def test_leave_one_group_out_holds_groups_together():
    per = [[np.array([0.9]), np.array([0.1])]] * 3
    labels = [np.array([1, 0])] * 3
    rows = leave_one_group_out(["a", "b", "c"], ["g1", "g1", "g2"], per, labels, "mean")
    assert [r["dataset"] for r in rows] == ["a", "b", "c"]
    assert all(r["auc"] == 1.0 and r["balanced_acc"] == 1.0 for r in rows)
    # fused reads each dataset's support scores; here support reverses the model's order, so the fused
    # scores tie (0.5 and 0.5) and rank at chance
    support = [np.array([0.1, 0.9])] * 3
    rows = leave_one_group_out(["a", "b", "c"], ["g1", "g1", "g2"], per, labels, "fused", support)
    assert all(r["auc"] == 0.5 for r in rows)


def test_int8_packing_bounds_the_error():
    import torch

    w = torch.randn(8, 16)
    state = {"layer.weight": w, "layer.bias": torch.randn(8), nli_model.FROZEN: torch.randn(4, 4)}
    packed = nli_model.pack_state(state)
    assert nli_model.FROZEN not in packed and packed["layer.weight"].dtype == torch.int8
    back = nli_model.unpack_state(packed)
    step = w.abs().amax(dim=1, keepdim=True) / 127
    assert torch.all((back["layer.weight"] - w).abs() <= step / 2 + 1e-6)
    assert torch.allclose(back["layer.bias"], state["layer.bias"], atol=1e-2)  # fp16


def test_shipped_model_loads_offline_and_checks_its_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model, tok, manifest = nli_model.load_shipped()
    assert manifest["kind"] == "minilm_l6_nli_cross_encoder_v1" and manifest["settings"]["steps"] > 0
    # entailed: a part of the premise, a paraphrase; not entailed: a contradiction, a swapped subject, a
    # reversed figure. (A hypernym, "playing an instrument", is below 0 for this small model: p = 0.34.)
    guitar, profit = "A man is playing a guitar on a stage in front of a crowd.", \
        "The company reported a profit of 3 million dollars in 2019."
    logits = nli_model.predict_logits(model, tok, [guitar, profit, guitar, guitar, profit], [
        "A man is playing a guitar.", "The company made money in 2019.",
        "The stage is empty and nobody is playing.", "A woman is playing a guitar.",
        "The company reported a loss in 2019."])
    assert min(logits[:2]) > 0 > max(logits[2:]), logits
    copy = tmp_path / "nli"
    shutil.copytree(nli_model.SHIPPED_DIR, copy)
    data = bytearray((copy / nli_model.WEIGHTS_NAME).read_bytes())
    data[-1] ^= 1
    (copy / nli_model.WEIGHTS_NAME).write_bytes(bytes(data))
    with pytest.raises(ValueError, match="weights.safetensors: sha256 differs"):
        nli_model.load_shipped(str(copy))
    with pytest.raises(FileNotFoundError, match="entailment model is not installed"):
        nli_model.load_shipped(str(tmp_path / "missing"))


def test_stage_scores_with_the_model_and_filters_at_its_threshold():
    import pyarrow as pa

    from synth.stages.summaries_filters import EntailmentFilter, EntailmentScore

    kept = "Mayor Ortiz said the change would cost 40,000 dollars a year. The council approved the budget."
    invented = "Mayor Fischer closed the city library for 12 weeks."
    t = pa.table({"payload": [DOC, DOC], "summary": [kept, invented]})
    result = EntailmentScore({"method": "nli"})(t)
    scored = result.table
    assert scored.column("entail__sentences").to_pylist() == [2, 1]
    # both sentences of the first are copies and the second names a mayor and a number the payload lacks:
    # the first pass settles all three, with no model call
    assert scored.column("entail__model_sentences").to_pylist() == [0, 0]
    assert scored.column("entail__min_sentence").to_pylist() == [1.0, 0.0]
    assert scored.column("entail__model_precision").to_pylist() == [None, None]
    assert result.stats.counters == {"sentences": 3, "sentences_read_by_model": 0, "sentences_settled_by_first_pass": 3}
    res = EntailmentFilter({"method": "nli"})(scored)
    assert res.stats.dropped == {"not_entailed": 1}
    assert res.table.column("summary").to_pylist() == [kept]
    assert set(EntailmentScore({"method": "nli"}).describe()["resources"]) == {
        "support_model", "consistency_model", "nli_weights", "nli_manifest"}
    # the default is the model (fused with the support score); the lexical score alone needs no model
    assert EntailmentScore({}).describe()["resources"] == EntailmentScore({"method": "nli"}).describe()["resources"]
    assert set(EntailmentScore({"method": "support"}).describe()["resources"]) == {"support_model"}


def test_model_reads_a_paraphrase_and_a_swap():
    """Sentences the first pass cannot settle go to the model: a paraphrase of the payload scores above
    a sentence whose every word is in the payload but whose claim is not."""
    from synth.summaries.scoring import score_summaries

    scored = score_summaries([DOC, DOC], ["The council gave its approval to the budget on Tuesday.",
                                          "The council closed the museum in Lyon on Tuesday."])
    assert [m.tolist() for m in scored.by_model] == [[True], [True]]
    (paraphrase,), (swap,) = scored.per_sentence
    assert paraphrase > 0.5 > swap, (paraphrase, swap)  # the model's own reading
    # the fused score keeps the order, but the lexical half pulls the paraphrase (three words the payload
    # lacks) below the threshold calibrated on news summaries: a known cost of fusing (docs/synth.md)
    assert scored.threshold > scored.score[0] > scored.score[1], scored.score


@pytest.mark.slow
def test_shipped_model_accuracy_on_its_held_out_pairs(shared_data):
    """The held-out figures in the model's manifest are reproduced by the shipped int8 weights (on MNLI's
    held-out premises, the "MNLI-style" accuracy)."""
    from synth.summaries.nli_data import read_folder
    from synth.summaries.nli_train import evaluate

    model, tok, manifest = nli_model.load_shipped()
    pairs, hashes = read_folder(shared_data / "nli", holdout_fraction=manifest["settings"]["holdout_fraction"])
    assert hashes == manifest["data_sha256"]
    mnli = [p for p in pairs if p.heldout and p.source == "docnli_mnli"]
    r = evaluate(model, tok, mnli)["docnli_mnli"]
    assert r["n"] == manifest["heldout"]["docnli_mnli"]["n"]
    # the same on a CPU of the same kind; bf16 and fp32 (chosen by CPU) move a few borderline pairs
    assert r["accuracy"] == pytest.approx(manifest["heldout"]["docnli_mnli"]["accuracy"], abs=0.01)
    assert r["accuracy"] > 0.7
