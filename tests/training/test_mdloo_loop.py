"""The MDLOO learner on a tiny megatron GPT: the update on hand-made batches, the config's checks, the
policy-version store, and (with the rollout generator) a run whose reward rises, resumes exactly and keeps
its rollouts at most `max_staleness` versions old."""

from __future__ import annotations

import pytest
import torch

from manifests.errors import ConfigError
from training.chat import load_tokenizer
from training.mdloo_config import from_raw
from training.mdloo_demo import configs
from training.rl_loop import Scored, WeightStore, sequences, token_logps, update
from training.rl_tasks import addition_records, answer_reward, record_prompt


def _run(tmp_path, **mdloo):
    _, raw = configs(tmp_path, **mdloo)
    return from_raw(raw, where="test")


def test_rule_reward_and_prompt_records():
    assert answer_reward("7<|end|>", "7") == 1.0 and answer_reward(" = 7.0<|end|>\n", "7") == 1.0
    assert answer_reward("17<|end|>", "7") == 0.0 and answer_reward("<|end|>7", "7") == 0.0
    assert answer_reward("3 then 7", "7") == 1.0 and answer_reward("7 then 3", "7") == 0.0
    tok = load_tokenizer("bytes")
    p = record_prompt({"question": "2 and 3?", "answer": "so 5\n#### 5"}, tok, where="f record 0")
    assert p.answer == "5" and p.text.endswith("2 and 3?<|end|>\n<|assistant|>\n")
    from manifests.errors import RecordError

    with pytest.raises(RecordError, match="record 3"):
        record_prompt({"messages": [{"role": "user", "content": "x"}]}, tok, where="f record 3")
    recs = addition_records(50, seed=0, with_answer=False, high=4)
    assert all(int(r["answer"]) == sum(int(x) for x in r["messages"][0]["content"].split("+")) for r in recs)


def test_config_checks(tmp_path):
    run = _run(tmp_path)
    assert run.mdloo.responses_per_prompt == 8 and run.post.method == "mdloo"
    with pytest.raises(ConfigError, match="n >= 2|>= 2"):
        _run(tmp_path, responses_per_prompt=1)
    with pytest.raises(ConfigError, match="unknown key"):
        _run(tmp_path, clip_range=0.2)
    with pytest.raises(ConfigError, match="kl_estimator"):
        _run(tmp_path, kl_estimator="k9")


def test_weight_store_keeps_recent_versions_and_wakes_waiters():
    import threading

    store = WeightStore(keep=2)
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("w", store.wait(1)))
    t.start()
    store.publish(0, {"w": torch.zeros(1)})
    store.publish(1, {"w": torch.ones(1)})
    t.join(timeout=5)
    assert float(got["w"]["w"]) == 1.0
    store.publish(2, {"w": torch.full((1,), 2.0)})
    assert sorted(store.versions()) == [1, 2]
    store.close()
    assert store.wait(7) is None


def _hand_batch(run, tokenizer):
    """4 prompts x n responses written by hand: the right sum (reward 1) or a wrong one (reward 0)."""
    n = run.mdloo.responses_per_prompt
    prompts, responses, rewards = [], [], []
    for k, (a, b) in enumerate([(1, 2), (3, 4), (0, 4), (2, 2)]):
        p = record_prompt({"messages": [{"role": "user", "content": f"{a}+{b}"}], "answer": str(a + b)},
                          tokenizer, where="hand")
        for i in range(n):
            right = i < 1 + k % 3  # 1..3 right answers per prompt
            text = f"{a + b if right else 'xyzw'[i]}"  # one token; a wrong one holds no number
            prompts.append(p.ids)
            responses.append(tokenizer.encode(text))
            rewards.append(answer_reward(text, p.answer))
    return prompts, responses, torch.tensor(rewards)


def _scored(run, model, reference, prompts, responses, rewards):
    tokens, labels, mask, _ = sequences(prompts, responses, [[0.0] * len(r) for r in responses], 0)
    with torch.no_grad():
        behaviour, _ = token_logps(model, tokens, labels)
        ref, ref_full = token_logps(reference, tokens, labels, full=True)
    return Scored(0, 0, tokens, labels, mask, behaviour * mask, ref, ref_full, rewards, [], 0.0)


@pytest.mark.parametrize("trust_kl", ["sampled", "full"])
def test_update_raises_right_answers_and_the_trust_region_holds_it_back(tmp_path, trust_kl):
    from training import parallel
    from training.optim import build_optimizer
    from training.post_loop import build_gpt

    tok = load_tokenizer("bytes")
    steps = {}
    for gamma in (0.0, 5.0):
        run = _run(tmp_path, trust_region=gamma, trust_kl=trust_kl, inner_steps=6, responses_per_prompt=4,
                   peak_lr=3e-3)
        parallel.setup(run.post.parallel, seed=7)
        model = build_gpt(run.post)
        reference = build_gpt(run.post)
        reference.load_state_dict(model.state_dict())
        prompts, responses, rewards = _hand_batch(run, tok)
        batch = _scored(run, model, reference, prompts, responses, rewards)
        answer_at = (torch.arange(len(batch.mask)), batch.mask.argmax(dim=1))  # the answer digit's position
        before = batch.ref_logp[answer_at]
        optimizer = build_optimizer(model, run.post.optim)
        row = update(run, model, optimizer, run.post.optim.schedule(100), batch, step0=0)
        with torch.no_grad():
            after = token_logps(model, batch.tokens, batch.labels)[0][answer_at]
        delta = after - before
        assert float(delta[rewards == 1].mean()) > 0 > float(delta[rewards == 0].mean())
        assert row["kl_ref"] == pytest.approx(0.0, abs=1e-5)  # π_θk = reference at the first iteration
        assert row["reward"] == pytest.approx(float(rewards.mean()))
        steps[gamma] = row["trust_kl_last"]
    assert steps[5.0] < steps[0.0]  # the trust region keeps π_θ nearer π_θk


def _tiny_run(tmp_path, name, **mdloo):
    """A few small iterations from a random-init checkpoint (rewards may be zero: mechanics only)."""
    from training import checkpoint as ckpt
    from training import parallel
    from training.post_loop import build_gpt

    _, raw = configs(tmp_path, iterations=4, peak_lr=1e-3, **{
        "prompts_per_iteration": 3, "responses_per_prompt": 3, "inner_steps": 2, "max_new_tokens": 4,
        "eval_prompts": 6, **mdloo})
    init = tmp_path / "init"
    if not (init / "checkpoint.json").exists():
        run = from_raw(raw, where="test")
        parallel.setup(run.post.parallel, seed=5)
        ckpt.save(init, model=build_gpt(run.post), manifest={"step": 0, "model_shape": {"hidden_size": 64}})
    raw.update(init_from=str(init), out_dir=str(tmp_path / name))
    return from_raw(raw, where="test")


@pytest.mark.slow
def test_resume_is_exact_and_staleness_is_bounded(tmp_path):
    from training.rl_loop import train_mdloo

    quiet = lambda *_: None  # noqa: E731
    full = train_mdloo(_tiny_run(tmp_path, "full"), log=quiet)
    assert [h["staleness"] for h in full.history] == [0, 1, 1, 1]  # iteration k+1 sampled by version k
    part = _tiny_run(tmp_path, "part")
    train_mdloo(part, stop_after=2, log=quiet)
    resumed = train_mdloo(part, resume="auto", log=quiet)
    keys = ("reward", "kl_ref", "penalised_reward", "trust_kl_last", "loss_last", "staleness")
    assert [[h[k] for k in keys] for h in resumed.history] == [[h[k] for k in keys] for h in full.history]
    a = torch.load(full.checkpoint / "model.pt", weights_only=True)
    b = torch.load(resumed.checkpoint / "model.pt", weights_only=True)
    assert all(torch.equal(a[k], b[k]) for k in a if torch.is_tensor(a[k]))
    sync = train_mdloo(_tiny_run(tmp_path, "sync", max_staleness=0), log=quiet)
    assert [h["staleness"] for h in sync.history] == [0, 0, 0, 0]
    assert sync.history[0]["reward"] == full.history[0]["reward"]  # iteration 1: same version, same seed


@pytest.mark.slow
def test_demo_reward_rises_while_the_kl_to_the_reference_stays_bounded(tmp_path, capsys):
    from training.mdloo_demo import run

    out = run(str(tmp_path))
    printed = capsys.readouterr().out
    assert "reward curve" in printed and "iter  reward" in printed
    # the sampled reward of the last third of the iterations beats the first third by a clear margin
    # (binary rewards over 128 responses: one iteration's mean has a standard error of about 0.04)
    assert out["late"] > out["early"] + 0.08, (out["early"], out["late"])
    first, last = out["held_out"][0][1], out["held_out"][-1][1]
    assert last["accuracy"] > first["accuracy"]  # held-out prompts, greedy answers
    kl = [h["kl_ref_exact_per_token"] for h in out["history"]]
    assert kl[0] == pytest.approx(0.0, abs=1e-6) and max(kl) < 0.25  # exact KL per response token, nats
    with open(out["plot"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_cli_train_mdloo(tmp_path, capsys):
    import dataclasses
    import json

    from manifests.main import main as cidermill
    from training.mdloo_config import load_config

    run = _tiny_run(tmp_path, "cli")
    raw = {**run.post.to_dict(), "mdloo": dataclasses.asdict(run.mdloo)}
    raw["model"] = {"shape": "tiny", "vocab_size": 256}
    raw["save_every"], raw["log_every"] = 1, 1
    config = tmp_path / "mdloo.yaml"
    config.write_text(json.dumps(raw))  # JSON is YAML
    assert load_config(config).mdloo == run.mdloo
    assert cidermill(["train", "mdloo", str(config), "--steps", "2"]) == 0
    assert cidermill(["train", "mdloo", str(config), "--steps", "3", "--out-dir", str(tmp_path / "cli3")]) == 0
    out = capsys.readouterr().out
    assert "[mdloo-demo] iteration 2/2 reward" in out and "reward curve" in out
    for p in ("configs/train/post/tiny-mdloo.yaml", "configs/train/post/afm-on-device-mdloo.yaml"):
        from tests.conftest import REPO

        cfg = load_config(REPO / p)
        assert cfg.post.method == "mdloo" and cfg.mdloo.responses_per_prompt >= 2


def test_prompts_too_long_for_the_sequence_are_refused_by_record(tmp_path):
    from manifests.errors import RecordError
    from training.rl_loop import load_prompts

    run = _run(tmp_path, max_new_tokens=60)  # prompt (~30 bytes) + 60 > seq_length 64
    with pytest.raises(RecordError, match=r"addition-prompts.jsonl.*record 0.*exceeds seq_length 64"):
        load_prompts(run, load_tokenizer("bytes"))
    train, valid = load_prompts(_run(tmp_path), load_tokenizer("bytes"))
    assert len(train) == 340 and len(valid) == 60
