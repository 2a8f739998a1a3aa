"""Reward model: soft-label Bradley-Terry and grading heads against hand computations; per-level report;
a tiny run on real pairs (AlpacaEval strengths -> levels, hh-rlhf binary pairs)."""

from __future__ import annotations

import math

import pytest
import torch

from training.pref_eval import pairwise_report
from training.reward import rm_loss, soft_bt_loss

from .test_sft import REPO

ALPACA = str(REPO / "data/samples/preference/alpaca_eval/fusechat_weighted.json.gz")
HH = str(REPO / "data/samples/preference/hh_rlhf/harmless-base_test.jsonl.gz")


def _sig(x):
    return 1 / (1 + math.exp(-x))


def test_soft_bt_loss_matches_a_hand_computation():
    for delta, p in ((0.7, 0.85), (-1.2, 0.95), (0.0, 0.65)):
        want = -(p * math.log(_sig(delta)) + (1 - p) * math.log(_sig(-delta)))
        got = float(soft_bt_loss(torch.tensor(delta, dtype=torch.float64), torch.tensor(p, dtype=torch.float64)))
        assert abs(got - want) < 1e-12
    # its minimum over delta is at sigma(delta) = p: the model is pushed to calibrated odds, not to infinity
    d = torch.linspace(-5, 5, 10001, dtype=torch.float64)
    best = d[soft_bt_loss(d, torch.tensor(0.75, dtype=torch.float64)).argmin()]
    assert abs(_sig(float(best)) - 0.75) < 1e-3


def test_rm_loss_adds_lambda_times_grading_cross_entropy():
    rewards = torch.tensor([1.0, 0.2, 0.5, 0.9], dtype=torch.float64)  # chosen 0,1 then rejected 0,1
    logits = {"truthful": torch.tensor([[2.0, 0.0], [0.0, 1.0], [0.5, 0.5], [1.0, 3.0]], dtype=torch.float64)}
    batch = {"level": torch.tensor([0, 3]), "grades": {"truthful": torch.tensor([0, 1, -100, 0])}}
    probs = torch.tensor([0.95, 0.85, 0.75, 0.65], dtype=torch.float64)
    loss, delta, grading = rm_loss(rewards, logits, batch, level_probs=probs, grading_weight=0.3)
    bt = [-(0.95 * math.log(_sig(0.5)) + 0.05 * math.log(_sig(-0.5))),
          -(0.65 * math.log(_sig(-0.7)) + 0.35 * math.log(_sig(0.7)))]
    ce = [-math.log(math.exp(2) / (math.exp(2) + 1)), -math.log(math.exp(1) / (math.exp(1) + 1)),
          -math.log(math.exp(1) / (math.exp(1) + math.exp(3)))]  # the -100 row has no grade
    want = sum(bt) / 2 + 0.3 * sum(ce) / 3
    assert abs(float(loss) - want) < 1e-12
    assert torch.allclose(delta, torch.tensor([0.5, -0.7], dtype=torch.float64))


def test_pairwise_report_accuracy_and_ece_per_level():
    rep = pairwise_report([2.0, -1.0, 0.0, 0.3], [0, 0, 1, 1], [0.95, 0.85])
    l0, l1 = rep["levels"][0], rep["levels"][1]
    assert l0["accuracy"] == 0.5 and l1["accuracy"] == 0.75  # a tie counts one half
    # level 0: sigma 0.8808 and 0.2689 in different bins -> 0.5·|0.8808-0.95| + 0.5·|0.2689-0.95|
    want0 = 0.5 * abs(_sig(2) - 0.95) + 0.5 * abs(_sig(-1) - 0.95)
    assert abs(l0["ece"] - want0) < 1e-12
    # level 1: sigma 0.5 and 0.5744 share bin 5 -> |mean - 0.85|
    assert abs(l1["ece"] - abs((0.5 + _sig(0.3)) / 2 - 0.85)) < 1e-12


@pytest.mark.slow
def test_tiny_rm_on_real_pairs_reports_per_level_figures(tmp_path):
    from training.post_config import from_dict
    from training.reward import train_rm

    cfg = from_dict({
        "name": "t-rm", "method": "rm", "model": {"shape": "tiny", "vocab_size": 256},
        "data": {"sources": [{"path": HH, "max_records": 20, "format": "hh_rlhf"},
                             {"path": ALPACA, "max_records": 40, "format": "alpaca_eval"}],
                 "valid_fraction": 0.2},
        "seq_length": 256, "optim": {"name": "afm_rmsprop", "peak_lr": 0.01, "warmup_steps": 2,
                                     "mup_base_width": 64},
        "rm": {}, "global_batch": 8, "micro_batch": 8, "steps": 30, "seed": 3,
        "out_dir": str(tmp_path / "rm"), "log_every": 0})
    r = train_rm(cfg, log=lambda *_: None)
    start, end = r.evals[0][1], r.evals[-1][1]
    assert start["accuracy"] == 0.5  # zero-initialised head: every delta is 0
    assert set(end["ece_by_level"]) >= {1}  # hh-rlhf pairs are binary -> level 1
    assert len(end["ece_by_level"]) >= 3  # alpaca strengths spread over levels
    # the wiring learns: ~45 training pairs are fitted (held-out accuracy of a byte-level tiny RM stays near
    # chance at this scale; the issue note gives the numbers)
    assert sum(r.losses[-5:]) / 5 < math.log(2) - 0.1, r.losses
    assert "ECE" in end["report"]


@pytest.mark.slow
def test_grading_heads_train_on_usr_topical_chat_gradings(tmp_path, shared_data):
    """Reads ../shared (USR Topical-Chat Likert gradings, research-use licence: not shipped in the repo)."""
    import json

    from training.post_config import from_dict
    from training.prefs import USR_GRADES, usr_graded_pairs
    from training.reward import train_rm

    records = json.loads((shared_data / "preference/usr_topicalchat_unieval/topical_chat.json").read_text())
    pairs = usr_graded_pairs(records)
    assert len(pairs) > 300 and {p["level"] for p in pairs} == {0, 1, 2}
    assert all(0 <= p["grades_chosen"]["naturalness"] <= 2 for p in pairs)
    path = tmp_path / "usr_pairs.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in pairs[:120]))
    heads = [[k, hi - lo + 1] for k, (lo, hi) in USR_GRADES.items()]
    cfg = from_dict({
        "name": "t-rm-graded", "method": "rm", "model": {"shape": "tiny", "vocab_size": 256},
        "data": {"sources": [{"path": str(path), "format": "graded"}], "valid_fraction": 0.2},
        "seq_length": 256, "optim": {"name": "afm_rmsprop", "peak_lr": 0.01, "warmup_steps": 2,
                                     "mup_base_width": 64},
        "rm": {"grading_heads": heads, "grading_weight": 0.5}, "global_batch": 8, "micro_batch": 8,
        "steps": 15, "seed": 3, "out_dir": str(tmp_path / "rm"), "log_every": 0})
    r = train_rm(cfg, log=lambda *_: None)
    grading = [m["grading_ce"] for m in r.metrics]
    assert sum(grading[-5:]) / 5 < sum(grading[:3]) / 3  # the heads' cross-entropy falls
    assert set(r.evals[-1][1]["accuracy_by_level"]) <= {0, 1, 2}


@pytest.mark.slow
def test_rm_resumes_exactly(tmp_path):
    from training.post_config import from_dict
    from training.reward import train_rm

    def cfg(out):
        return from_dict({
            "name": "t-rm-resume", "method": "rm", "model": {"shape": "tiny", "vocab_size": 256},
            "data": {"sources": [{"path": ALPACA, "max_records": 40, "format": "alpaca_eval"}]},
            "seq_length": 128, "optim": {"name": "afm_rmsprop", "peak_lr": 0.01, "warmup_steps": 1},
            "rm": {}, "global_batch": 4, "micro_batch": 4, "steps": 4, "seed": 3, "out_dir": str(out),
            "log_every": 0})

    full = train_rm(cfg(tmp_path / "full"), log=lambda *_: None)
    train_rm(cfg(tmp_path / "cut"), stop_after=2, log=lambda *_: None)
    resumed = train_rm(cfg(tmp_path / "cut"), resume="auto", log=lambda *_: None)
    assert resumed.losses == full.losses[2:]
    a, b = torch.load(full.checkpoint / "model.pt"), torch.load(resumed.checkpoint / "model.pt")
    assert "score.weight" in a and all(torch.equal(a[k], b[k]) for k in a if torch.is_tensor(a[k]))

    # the function `eval model --tasks preference` can call: every pair of a file, per level
    from training.reward import preference_eval

    rep = preference_eval(str(resumed.checkpoint), HH, fmt="hh_rlhf", max_records=12)
    assert rep["pairs"] == 12 and set(rep["levels"]) == {1} and "ECE" in rep["table"]


def test_reward_model_sharded_state_dict_covers_every_weight():
    """What megatron's dist_checkpointing saves on GPU: every tensor of the RM (GPT + heads) once, by key."""
    from megatron.core.dist_checkpointing.mapping import ShardedTensor

    from training import parallel
    from training.model import build_model, get_shape
    from training.reward import RewardModel

    parallel.setup(parallel.ParallelConfig(), seed=3)
    gpt = build_model(get_shape("tiny", vocab_size=256), seq_length=64)
    rm = RewardModel(gpt, hidden=64, grading_heads=(("truthful", 3),))
    sharded = rm.sharded_state_dict()
    plain = {k: v for k, v in rm.state_dict().items() if isinstance(v, torch.Tensor)}
    tensors = {k: v for k, v in sharded.items() if isinstance(v, ShardedTensor)}
    assert set(plain) <= set(sharded)
    for k in ("score.weight", "score.bias", "grading.truthful.0.weight", "gpt.decoder.final_layernorm.weight"):
        assert k in tensors and tensors[k].data.data_ptr() == plain[k].data_ptr()
    # no two tensors in one place of the checkpoint (decoder layers share a key, at different layer offsets)
    assert len({(t.key, t.global_offset) for t in tensors.values()}) == len(tensors)


def test_wilson_interval_against_a_hand_computation():
    from training.pref_eval import wilson_interval

    lo, hi = wilson_interval(50, 100)  # p = 0.5, n = 100: centre 0.5
    z = 1.959964
    half = z * math.sqrt(0.25 / 100 + z * z / (4 * 100 ** 2)) / (1 + z * z / 100)
    assert abs(lo - (0.5 - half)) < 1e-12 and abs(hi - (0.5 + half)) < 1e-12
    assert abs(lo - 0.4038) < 1e-4
    assert pairwise_report([1.0] * 9 + [-1.0], [0] * 10, [0.95])["accuracy_ci95"] == wilson_interval(9, 10)


@pytest.mark.parametrize("pooling", ["last", "mean"])
def test_reward_does_not_depend_on_padding(pooling):
    from training import parallel
    from training.chat import ByteTokenizer
    from training.model import build_model, get_shape
    from training.prefs import Pair, PairItem, pair_batch, tokenize_response
    from training.reward import RewardModel

    parallel.setup(parallel.ParallelConfig(), seed=4)
    rm = RewardModel(build_model(get_shape("tiny", vocab_size=256), seq_length=160), hidden=64, pooling=pooling)
    torch.nn.init.normal_(rm.score.weight)
    rm.eval()
    prompt = [{"role": "user", "content": "Is the sky blue?"}]
    tok = ByteTokenizer()
    item = PairItem(Pair(prompt, "Yes, on a clear day.", "No.", 1),
                    tokenize_response(prompt, "Yes, on a clear day.", tok, budget=129),
                    tokenize_response(prompt, "No.", tok, budget=129))
    with torch.no_grad():
        short, _ = rm(pair_batch([item], 96, 0))
        long, _ = rm(pair_batch([item], 160, 0))
    assert torch.allclose(short, long, atol=1e-5) and float((short[0] - short[1]).abs()) > 0


def _hh_items(n: int, seq: int):
    from training.chat import ByteTokenizer
    from training.post_loop import read_records
    from training.prefs import PairItem, record_pair, tokenize_response

    tok = ByteTokenizer()
    items = []
    for i, rec in enumerate(read_records(HH)[:n]):
        pair = record_pair(rec, fmt="hh_rlhf", where=f"{HH} record {i}", thresholds=(0.9, 0.6, 0.3), binary_level=1,
                           source=HH)
        items.append(PairItem(pair, tokenize_response(pair.prompt, pair.chosen, tok, budget=seq + 1),
                              tokenize_response(pair.prompt, pair.rejected, tok, budget=seq + 1)))
    return items


def test_head_lr_mult_gives_the_heads_their_own_rate_and_a_faster_fall():
    """rm.head_lr_mult: the scalar and grading heads sit in optimizer groups at peak_lr x mult (times the
    μParam factor where there is one), every body weight at its usual rate; on a fixed batch of real hh-rlhf
    pairs the loss falls, and faster than with the heads at the body's rate."""
    from training import parallel
    from training.model import build_model, get_shape
    from training.optim import OptimConfig, build_optimizer, param_groups
    from training.prefs import pair_batch
    from training.reward import RewardModel

    def fresh(mult):
        parallel.setup(parallel.ParallelConfig(), seed=5)
        return RewardModel(build_model(get_shape("tiny", vocab_size=256), seq_length=96), hidden=64,
                           grading_heads=(("truthful", 3),), head_lr_mult=mult)

    rm = fresh(40.0)
    groups = param_groups(rm, OptimConfig(name="adamw", peak_lr=1e-3, mup_base_width=32))
    rate = {id(p): g["lr"] for g in groups for p in g["params"]}
    heads = dict(rm.named_parameters())
    assert rate[id(heads["score.weight"])] == pytest.approx(1e-3 * 40 * 32 / 64)  # μParam 32/64, then x40
    assert rate[id(heads["score.bias"])] == pytest.approx(1e-3 * 40)
    assert rate[id(heads["grading.truthful.2.weight"])] == pytest.approx(1e-3 * 40 * 32 / 64)
    body = [(n, p) for n, p in rm.named_parameters() if n.startswith("gpt.")]
    assert body and all(rate[id(p)] in (pytest.approx(1e-3), pytest.approx(1e-3 * 32 / p.shape[-1]))
                        for n, p in body)
    assert max(rate[id(p)] for _, p in body) <= 1e-3
    assert len(rate) == sum(1 for _ in rm.parameters())  # every weight in exactly one group

    batch = pair_batch(_hh_items(4, 64), 64, 0)
    probs = torch.tensor([0.95, 0.85, 0.75, 0.65])

    def losses(mult):
        model = fresh(mult)
        opt = build_optimizer(model, OptimConfig(name="adamw", peak_lr=1e-4, weight_decay=0.0))
        out = []
        for _ in range(4):
            r, _ = model(batch)
            loss, _, _ = rm_loss(r, {}, batch, level_probs=probs, grading_weight=0.0)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(float(loss.detach()))
        return out

    slow, fast = losses(1.0), losses(100.0)
    assert slow[0] == pytest.approx(math.log(2)) and fast[0] == pytest.approx(math.log(2))  # zero head: Δ = 0
    assert fast[-1] < fast[0] - 0.1, fast
    assert fast[-1] < slow[-1] - 0.05, (slow, fast)


def test_head_lr_mult_is_validated():
    from manifests.errors import ConfigError
    from training.post_config import RMConfig

    assert RMConfig(head_lr_mult=30).head_lr_mult == 30
    for bad in (0, -1.0, "fast"):
        with pytest.raises(ConfigError, match="rm.head_lr_mult"):
            RMConfig(head_lr_mult=bad)


def test_probe_fit_equals_scikit_learns_weighted_logistic_regression():
    """fit_soft_bt against an independent reference: scikit-learn's L2 logistic regression without intercept
    on each pair twice, (d, 1) weighted p and (d, 0) weighted 1 - p, whose objective C·Σ soft_bt + |w|²/2 is
    n·C times ours at l2 = 1 / (n·C)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from training.reward import fit_soft_bt

    rng = np.random.default_rng(0)
    n, h = 120, 6
    d = rng.normal(size=(n, h)) * np.array([1, 2, 0.5, 1, 3, 1])
    p = np.array([0.95, 0.85, 0.75, 0.65])[rng.integers(0, 4, size=n)]
    flip = rng.random(n) < 0.3
    d[flip] *= -1  # noisy pairs: the optimum is finite
    for c in (0.05, 1.0):
        ref = LogisticRegression(C=c, fit_intercept=False, tol=1e-12, max_iter=10_000).fit(
            np.concatenate([d, d]), np.r_[np.ones(n), np.zeros(n)], sample_weight=np.r_[p, 1 - p]).coef_[0]
        ours = fit_soft_bt(torch.tensor(d), torch.tensor(p), 1 / (n * c)).numpy()
        assert np.abs(ours - ref).max() < 1e-5, (ours, ref)


def test_probe_fit_chooses_l2_by_cross_validation_and_reports_it():
    from training.reward import probe_fit

    g = torch.Generator().manual_seed(1)
    w_true = torch.tensor([2.0, -1.0, 0.0, 0.0])
    d = torch.randn(200, 4, generator=g, dtype=torch.float64) * torch.tensor([1.0, 1.0, 5.0, 0.1], dtype=torch.float64)
    d = d * torch.sign(d @ w_true.double())[:, None]  # the chosen side first, as in a pair file
    p = torch.sigmoid(d @ w_true.double()).clamp(0.5, 0.95)
    d[::5] *= -1  # label noise: a fifth of the pairs point the other way
    w, rep = probe_fit(d, p, l2_grid=(1e-3, 1.0, 100.0), folds=4, seed=0)
    assert rep["pairs"] == 200 and rep["folds"] == 4 and set(rep["grid"]) == {"0.001", "1", "100"}
    assert rep["l2"] == min((1e-3, 1.0, 100.0), key=lambda k: rep["grid"][f"{k:g}"]["cv_loss"])
    assert rep["l2"] != 100.0 and 0.7 < rep["cv_accuracy"] < 0.85  # a strong penalty loses on held-out folds
    sd = d.std(0)  # w is in the unscaled features' units: each weight times its feature's spread is its say
    assert torch.nn.functional.cosine_similarity(w * sd, w_true.double() * sd, dim=0) > 0.95
    again, rep2 = probe_fit(d, p, l2_grid=(100.0, 1.0, 1e-3), folds=4, seed=0)  # order of the grid is irrelevant
    assert torch.equal(w, again) and rep2 == rep


def test_probe_head_config_is_validated():
    from manifests.errors import ConfigError
    from training.post_config import RMConfig, from_dict

    assert RMConfig(head_init="probe", probe_l2=(0.1,), probe_folds=3).probe_folds == 3
    for bad, match in (({"head_init": "lp"}, "rm.head_init"), ({"probe_l2": ()}, "rm.probe_l2"),
                       ({"probe_l2": (0.1, -1)}, "rm.probe_l2"), ({"probe_l2": ("x",)}, "rm.probe_l2"),
                       ({"probe_folds": 1}, "rm.probe_folds"), ({"probe_folds": 2.5}, "rm.probe_folds")):
        with pytest.raises(ConfigError, match=match):
            RMConfig(**bad)
    cfg = from_dict({"name": "t", "method": "rm", "model": {"shape": "tiny", "vocab_size": 256},
                     "data": {"sources": [{"path": HH, "format": "hh_rlhf"}]},
                     "rm": {"head_init": "probe", "probe_l2": [0.01, 1]}})
    assert cfg.rm.probe_l2 == (0.01, 1)


@pytest.mark.slow
def test_rm_with_a_probe_head_starts_above_chance_and_records_the_fit(tmp_path):
    """head_init: probe on a tiny byte-level model and real hh-rlhf pairs: the head is fitted before step 1
    (its fit on the training pairs is in the log and the checkpoint's manifest), so the training pairs' loss
    at step 1 is already below log 2; a run resumed from its checkpoint keeps the checkpoint's head."""
    import json

    from training.post_config import from_dict
    from training.reward import train_rm

    def cfg(out, steps):
        return from_dict({
            "name": "t-rm-probe", "method": "rm", "model": {"shape": "tiny", "vocab_size": 256},
            "data": {"sources": [{"path": HH, "max_records": 48, "format": "hh_rlhf"}], "valid_fraction": 0.2},
            "seq_length": 128, "optim": {"name": "adamw", "peak_lr": 1e-4, "warmup_steps": 1},
            "rm": {"head_init": "probe", "pooling": "mean", "probe_l2": [0.01, 1.0], "probe_folds": 3},
            "global_batch": 8, "micro_batch": 8, "steps": steps, "seed": 3, "out_dir": str(out), "log_every": 0})

    logs = []
    r = train_rm(cfg(tmp_path / "rm", 2), stop_after=1, log=logs.append)
    assert any("linear probe on the frozen body" in str(x) and "L2" in str(x) for x in logs)
    assert r.losses[0] < math.log(2)  # the zero head's first loss is exactly log 2
    manifest = json.loads((r.checkpoint / "checkpoint.json").read_text())
    probe = manifest["head_probe"]
    assert probe["pairs"] >= 30 and probe["l2"] in (0.01, 1.0) and set(probe["grid"]) == {"0.01", "1"}
    head = torch.load(r.checkpoint / "model.pt")["score.weight"]
    logs.clear()
    resumed = train_rm(cfg(tmp_path / "rm", 2), resume="auto", log=logs.append)
    assert not any("linear probe" in str(x) for x in logs)  # the resumed run's head is its checkpoint's
    assert resumed.losses and not torch.equal(head, torch.load(resumed.checkpoint / "model.pt")["score.weight"])
