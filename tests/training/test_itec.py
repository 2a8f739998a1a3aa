"""iTeC: prompt-level reranking against hand-made rows; two rounds at tiny shapes whose catalog versions
record member and reward per row, whose second round includes the member trained on round 1's RS data, and
whose rerun makes no model call (rollouts, rewards and reference log-probs come from the cache)."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from manifests.catalog import Catalog
from manifests.errors import ConfigError
from training import checkpoint as ckpt
from training.chat import ByteTokenizer
from training import parallel
from training.itec import run_itec, select
from training.itec_config import from_dict
from training.model import build_model, get_shape
from training.rewards import RewardScorer

from .test_sft import REPO

GSM8K = str(REPO / "data/samples/gsm8k/train_short64.jsonl")
HH = str(REPO / "data/samples/preference/hh_rlhf/harmless-base_test.jsonl.gz")


def test_select_keeps_best_per_prompt_and_best_worst_pairs():
    prompts = [{"id": f"p{i}", "messages": [{"role": "user", "content": f"q{i}"}]} for i in range(4)]
    rows = [
        # p0: best b (0.9), worst a (0.1)
        {"prompt": 0, "member": "sft", "member_rank": 0, "sample": 0, "reward": 0.1, "response": "a"},
        {"prompt": 0, "member": "dpo", "member_rank": 1, "sample": 0, "reward": 0.9, "response": "b"},
        # p1: a tie at the top goes to the earlier member; all equal -> no pair
        {"prompt": 1, "member": "sft", "member_rank": 0, "sample": 1, "reward": 0.5, "response": "c"},
        {"prompt": 1, "member": "dpo", "member_rank": 1, "sample": 0, "reward": 0.5, "response": "d"},
        # p2: best is empty text -> neither RS nor pair
        {"prompt": 2, "member": "sft", "member_rank": 0, "sample": 0, "reward": 1.0, "response": "  "},
        {"prompt": 2, "member": "dpo", "member_rank": 1, "sample": 0, "reward": 0.0, "response": "e"},
        # p3: margin 0.05 <= min_margin 0.1 -> RS row only; best below min_best_reward? 0.3 >= 0.2: kept
        {"prompt": 3, "member": "sft", "member_rank": 0, "sample": 0, "reward": 0.25, "response": "f"},
        {"prompt": 3, "member": "dpo", "member_rank": 1, "sample": 0, "reward": 0.3, "response": "g"},
    ]
    rs, pairs, counters = select(prompts, rows, min_margin=0.1, min_best_reward=0.2)
    assert [(r["prompt_id"], r["messages"][-1]["content"], r["member"]) for r in rs] == \
        [("p0", "b", "dpo"), ("p1", "c", "sft"), ("p3", "g", "dpo")]
    assert [(p["prompt_id"], p["chosen"], p["rejected"]) for p in pairs] == [("p0", "b", "a")]
    assert counters == {"prompts": 4, "prompts_sampled": 4, "rs_rows": 3, "pairs": 1, "best_below_min_reward": 0,
                        "best_empty": 1, "pair_within_margin": 2}
    assert [r["is_best"] for r in rows] == [False, True, True, False, False, False, False, True]
    assert [r["is_worst"] for r in rows] == [True] + [False] * 7
    rs, _, counters = select(prompts, rows, min_margin=0.0, min_best_reward=0.6)
    assert [r["prompt_id"] for r in rs] == ["p0"] and counters["best_below_min_reward"] == 2


def test_config_errors_say_the_fix():
    base = {"name": "x", "root": "r", "out_dir": "o", "prompts": [{"kind": "gsm8k", "path": GSM8K}],
            "committee": [{"name": "a", "checkpoint": "c"}]}
    with pytest.raises(ConfigError, match="pairs need >= 2 responses"):
        from_dict({**base, "samples_per_member": 1})
    with pytest.raises(ConfigError, match="rounds > 1 needs `refresh`"):
        from_dict({**base, "rounds": 2})
    with pytest.raises(ConfigError, match="kind must be one of"):
        from_dict({**base, "prompts": [{"kind": "poems", "path": "p"}]})
    with pytest.raises(ConfigError, match="unknown key 'temp' in itec config: generation"):
        from_dict({**base, "generation": {"temp": 1.0}})
    with pytest.raises(ConfigError, match=r"no entry for prompt type\(s\) \['math'\]"):
        from_dict({**base, "rewards": {"weights": {"chat": {"rm": 1.0}}}})


class CountingRM:
    """Stands in for the RM in this test of the loop around it (caching, bookkeeping): reward = a function
    of the response text, and every call counted."""

    def __init__(self):
        self.calls = 0

    def score(self, items):
        self.calls += 1
        return [(sum(map(ord, r)) % 97) / 97 - 0.5 for _, r in items]


def _member(directory, seed):
    parallel.setup(parallel.ParallelConfig(), seed=seed)
    shape = get_shape("tiny", vocab_size=256)
    model = build_model(shape, seq_length=256, rotary_base=10_000)
    ckpt.save(directory, model=model, manifest={
        "run": directory.name, "stage": "post-sft", "step": 0, "model_shape": asdict(shape), "rotary_base": 10_000,
        "kernels": "local", "config": {"tokenizer": "bytes",
                                       "optim": {"name": "afm_rmsprop", "mup_base_width": 64}},
        "data": {"seq_length": 256}}, tokenizer=(ByteTokenizer().describe(), None))
    return str(directory)


def r2_member(result, name):
    return next(m.checkpoint for m in result.members if m.name == name)


@pytest.mark.slow
def test_two_rounds_publish_versions_refresh_the_committee_and_rerun_from_cache(tmp_path):
    cfg = from_dict({
        "name": "t", "root": str(tmp_path / "root"), "out_dir": str(tmp_path / "out"),
        "prompts": [{"kind": "gsm8k", "path": GSM8K, "limit": 3},
                    {"kind": "preference", "path": HH, "format": "hh_rlhf", "limit": 2},
                    {"kind": "instructions", "path": HH, "format": "hh_rlhf", "skip": 2, "limit": 2}],
        "committee": [{"name": "sft", "checkpoint": _member(tmp_path / "sft", 1)},
                      {"name": "dpo", "checkpoint": _member(tmp_path / "dpo", 2)}],
        "samples_per_member": 2,
        "generation": {"max_new_tokens": 8, "temperature": 1.0, "top_p": 1.0, "seed": 3, "max_prompt_tokens": 200},
        "rewards": {"weights": {"math": {"math": 1.0, "rm": 0.5}, "chat": {"rm": 1.0},
                                "instruction": {"instruction": 1.0}}},
        "rounds": 2,
        "refresh": [{"method": "sft", "steps": 2}, {"method": "dpo", "loss": "ipo", "beta": 0.5, "steps": 2}],
        "train": {"seq_length": 256, "micro_batch": 2, "global_batch": 2, "valid_fraction": 0.3},
    })
    rm = CountingRM()
    first = run_itec(cfg, log=lambda *_: None, scorer=RewardScorer(cfg.rewards, rm=rm))
    calls = first.model_calls
    # round 1: 2 members generate; the dpo member's responses are scored by the reference (sft); round 2 adds
    # sft-r1 and ipo-r1: 4 generations, 3 reference passes; two members trained; RM once per member per round
    assert (calls.generate, calls.reference, calls.training) == (6, 4, 2)
    assert calls.reward_model == rm.calls == 6
    r1, r2 = first.rounds
    assert r1.committee == ["sft", "dpo"] and r2.committee == ["sft", "dpo", "sft-r1", "ipo-r1"]
    cat = Catalog(cfg.root)
    t1 = cat.resolve(r1.version).read().to_pylist()
    t2 = cat.resolve(r2.version).read().to_pylist()
    assert len(t1) == 7 * 2 * 2 and len(t2) == 7 * 4 * 2  # every prompt fits 200 tokens
    assert {r["member"] for r in t2} == {"sft", "dpo", "sft-r1", "ipo-r1"}
    for row in t1:  # each row's reward is its components combined with the config's weights
        comps = json.loads(row["reward_components"])
        w = cfg.rewards.weights[row["prompt_type"]]
        assert row["reward"] == pytest.approx(sum(w[c] * v for c, v in comps.items()))
        if row["prompt_type"] == "math":  # what the math rule decided on is kept with the row
            detail = json.loads(row["reward_detail"])["math"]
            assert detail["gold"] and detail["extracted"] in ("stated", "last number", "none")
        if row["member"] == "sft":  # the reference's own log-probs are the generator's
            assert row["reference_logprob"] == row["member_logprob"]
    assert sum(r["is_best"] for r in t1) == 7
    best = {r["prompt_id"]: r for r in t1 if r["is_best"]}
    assert all(best[r["prompt_id"]]["reward"] >= r["reward"] for r in t1)
    manifest = cat.resolve(r2.version).manifest
    assert manifest.parents == [cat.resolve(r1.version).version_id]
    assert manifest.extra["counters"]["math_answer_by_last_number"] == sum(
        json.loads(r["reward_detail"]).get("math", {}).get("extracted") == "last number" for r in t2)
    assert manifest.extra["itec_round"] == 2 and manifest.extra["committee"] == ["sft", "dpo", "sft-r1", "ipo-r1"]
    rs = [json.loads(x) for x in open(r1.rs_path)]
    pairs = [json.loads(x) for x in open(r1.pairs_path)]
    assert len(pairs) == r1.counters["pairs"] >= 2 and all(p["chosen_reward"] > p["rejected_reward"] for p in pairs)
    ipo = ckpt.open_checkpoint(r2_member(first, "ipo-r1")).manifest
    assert ipo["config"]["dpo"]["loss"] == "ipo" and ipo["config"]["data"]["sources"][0]["path"] == r1.pairs_path
    assert [r["messages"][-1]["content"] for r in rs] == [best[r["prompt_id"]]["response"] for r in rs]

    rm2 = CountingRM()
    again = run_itec(cfg, log=lambda *_: None, scorer=RewardScorer(cfg.rewards, rm=rm2))
    assert again.model_calls.total == 0 and rm2.calls == 0
    assert [r.version for r in again.rounds] == [r1.version, r2.version]  # same content, same versions
    assert [r.mean_reward for r in again.rounds] == [r1.mean_reward, r2.mean_reward]


@pytest.mark.parametrize("path", sorted((REPO / "configs/train/post").glob("*-itec*.yaml")), ids=lambda p: p.name)
def test_itec_configs_validate(path):
    from training.itec_config import load_config

    cfg = load_config(path)
    assert cfg.committee and cfg.prompts
    from training.itec_config import TYPE_OF_KIND

    assert cfg.rewards.rm_checkpoint or not cfg.rewards.uses_rm({TYPE_OF_KIND[s.kind] for s in cfg.prompts})
    assert all((REPO / s.path).is_file() for s in cfg.prompts)  # prompt files ship with the repository
    assert cfg.rounds == 1 or cfg.refresh


def test_rl_prompt_records_are_math_prompts_verbatim(tmp_path):
    from manifests.errors import RecordError
    from training.itec import load_prompts

    path = tmp_path / "p.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "3+4"}], "answer": "7"}\n'
                    '{"messages": [{"role": "user", "content": "0+2"}], "answer": " 2 "}\n')
    cfg = from_dict({"name": "t", "root": str(tmp_path), "out_dir": str(tmp_path / "o"),
                     "prompts": [{"kind": "gsm8k", "path": str(path), "skip": 1}],
                     "committee": [{"name": "a", "checkpoint": "x"}], "samples_per_member": 2,
                     "rewards": {"weights": {"math": {"math": 1.0}}}})
    (row,) = load_prompts(cfg)  # no GSM8K answer-format suffix: the turns as written
    assert row["type"] == "math" and row["messages"] == [{"role": "user", "content": "0+2"}]
    assert row["reference"] == {"answer": "2"} and row["id"] == "math-1"
    path.write_text('{"messages": [{"role": "user", "content": "3+4"}]}\n')
    with pytest.raises(RecordError, match="record 0.*answer"):
        load_prompts(cfg)
