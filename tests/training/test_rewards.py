"""Rule rewards and their combination, on hand-checked cases; the RM scorer against the RM's own batch path."""

from __future__ import annotations

import json
import math

import pytest
import torch

from manifests.errors import ConfigError, RecordError
from training.rewards import (RewardConfig, RewardScorer, code_reward, instruction_reward, math_reward,
                              parse_tool_calls, reward_config, tool_reward)

from tests.system_deps import require_some_isolation

from .test_sft import REPO

HH = str(REPO / "data/samples/preference/hh_rlhf/harmless-base_test.jsonl.gz")


def test_math_reward_uses_the_projects_answer_equivalence():
    ref = {"answer": "60"}
    assert math_reward("3*400=1200 pages, 1200/20=60. The answer is 60.", ref).value == 1.0
    assert math_reward("The answer is 60.0 days.", ref).value == 1.0  # numeric equality, trailing unit text
    assert math_reward("\\boxed{120/2}", ref).value == 1.0  # symbolic: 120/2 == 60
    assert math_reward("The answer is 61.", ref).value == 0.0
    s = math_reward("he needs 20 days then 60", ref)  # no stated answer: the last number
    assert (s.value, s.detail["extracted"]) == (1.0, "last number")
    assert math_reward("I do not know", ref).detail == {"pred": None, "gold": "60", "extracted": "none"}


def test_instruction_reward_is_the_share_of_ifeval_checks_followed():
    ref = {"instruction_id_list": ["change_case:english_lowercase", "punctuation:no_comma",
                                   "length_constraints:number_words"],
           "kwargs": [{}, {}, {"relation": "less than", "num_words": 5}]}
    assert instruction_reward("all lower case here", ref).value == 1.0
    # upper case letter and a comma; 4 words < 5 still holds
    assert instruction_reward("Lower, case here", ref).value == pytest.approx(1 / 3)
    assert instruction_reward("", ref).value == 0.0


TOOLS = [{"name": "get_rate", "parameters": {"type": "object", "properties": {
    "base": {"type": "string"}, "amount": {"type": "float"}, "days": {"type": "integer"}}}}]
GOLD = {"calls": [{"get_rate": {"base": ["USD"], "amount": [100.0], "days": ["", 7]}}]}


def test_tool_reward_parses_our_template_and_python_calls_and_applies_the_bfcl_checker():
    ours = '<|tool_call|>{"arguments": {"amount": 100, "base": "usd"}, "name": "get_rate"}'
    assert parse_tool_calls(ours) == [{"name": "get_rate", "arguments": {"amount": 100, "base": "usd"}}]
    assert tool_reward(ours, GOLD, TOOLS).value == 1.0  # int for float coerced, strings case-insensitive, days optional
    assert tool_reward('[get_rate(base="USD", amount=100.0, days=7)]', GOLD, TOOLS).value == 1.0
    assert tool_reward('[get_rate(base="USD", amount=100.0, days=7.0)]', GOLD, TOOLS).value == 0.0  # float for int
    assert tool_reward('[get_rate(base="EUR", amount=100.0)]', GOLD, TOOLS).value == 0.0  # wrong value
    assert tool_reward('[get_rate(base="USD", amount=100.0, extra=1)]', GOLD, TOOLS).value == 0.0  # unknown param
    bad = tool_reward('<|tool_call|>{"name": "get_rate", "arguments": ', GOLD, TOOLS)
    assert bad.value == 0.0 and bad.detail["parsed"] is False


def test_code_reward_runs_the_sandbox_judge():
    from synth.sandbox import Sandbox

    require_some_isolation()
    tests = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"]
    with Sandbox(max_workers=1) as box:
        good = code_reward("Here:\n```python\ndef add(a, b):\n    return a + b\n```", {"tests": tests}, box)
        off = code_reward("def add(a, b):\n    return a + b + (a == 2)", {"tests": tests}, box)
        broken = code_reward("def add(a, b) return", {"tests": tests}, box)
    assert (good.value, good.detail["verdict"]) == (1.0, "passed")
    assert off.value == pytest.approx(2 / 3) and off.detail["passed"] == 2
    assert broken.value == 0.0 and "does not parse" in broken.detail["reason"]


class ConstantRM:
    def __init__(self, value):
        self.value, self.items = value, []

    def score(self, items):
        self.items += list(items)
        return [self.value] * len(items)


def test_rewards_combine_per_prompt_type():
    cfg = reward_config({"weights": {"math": {"math": 1.0, "rm": 0.5}, "chat": {"rm": 2.0},
                                     "instruction": {"instruction": 1.0}}})
    rm = ConstantRM(math.log(3))  # sigmoid(log 3) = 0.75
    prompts = [
        {"id": "m", "type": "math", "messages": [{"role": "user", "content": "1+1?"}], "reference": {"answer": "2"}},
        {"id": "c", "type": "chat", "messages": [{"role": "user", "content": "hi"}], "reference": {}},
        {"id": "i", "type": "instruction", "messages": [{"role": "user", "content": "x"}],
         "reference": {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}},
    ]
    out = RewardScorer(cfg, rm=rm).score(prompts, ["The answer is 2.", "hello", "a, b"])
    assert out[0]["reward"] == pytest.approx(1.0 + 0.5 * 0.75)
    assert out[1]["reward"] == pytest.approx(2 * 0.75) and out[1]["components"] == {"rm": pytest.approx(0.75)}
    assert out[2] == {"reward": 0.0, "components": {"instruction": 0.0}, "detail": {"instruction": {"strict": [False]}}}
    assert [m for m, _ in rm.items] == [prompts[0]["messages"], prompts[1]["messages"]]  # the RM only where weighted


def test_reward_config_errors_name_the_fix():
    with pytest.raises(ConfigError, match="unknown prompt type 'poem'"):
        RewardConfig(weights={"poem": {"rm": 1.0}})
    with pytest.raises(ConfigError, match="the 'math' rule needs math prompts"):
        RewardConfig(weights={"chat": {"math": 1.0}})
    with pytest.raises(ConfigError, match="rm_checkpoint is unset"):
        RewardScorer(RewardConfig()).score([{"id": "c", "type": "chat", "messages": []}], ["x"])


@pytest.mark.slow
def test_rm_scorer_equals_the_reward_models_pair_scores(tmp_path):
    from training import parallel
    from training.chat import ByteTokenizer
    from training.post_config import from_dict
    from training.prefs import load_pairs, pair_batch
    from training.reward import load_reward_model, train_rm
    from training.rewards.model import RewardModelScorer

    cfg = from_dict({"name": "t-rm", "method": "rm", "model": {"shape": "tiny", "vocab_size": 256},
                     "data": {"sources": [{"path": HH, "format": "hh_rlhf", "max_records": 24}],
                              "valid_fraction": 0.25},
                     "seq_length": 128, "rm": {}, "global_batch": 4, "micro_batch": 4, "steps": 4, "seed": 2,
                     "optim": {"name": "afm_rmsprop", "peak_lr": 0.01, "warmup_steps": 1, "mup_base_width": 64},
                     "out_dir": str(tmp_path / "rm"), "log_every": 0})
    ckpt = train_rm(cfg, log=lambda *_: None).checkpoint
    scorer = RewardModelScorer(ckpt, micro_batch=3)
    _, valid, _ = load_pairs(cfg, ByteTokenizer())
    items = valid[:4]
    got = scorer.score([(it.pair.prompt, it.pair.chosen) for it in items] +
                       [(it.pair.prompt, it.pair.rejected) for it in items])
    model, _ = load_reward_model(str(ckpt))
    with torch.no_grad():
        b = {k: v.to(parallel.device()) for k, v in pair_batch(items, cfg.seq_length, 0).items()}
        want, _ = model(b)
    assert scorer.calls == 3  # 8 items in micro-batches of 3
    assert max(abs(a - b) for a, b in zip(got, want.tolist())) < 1e-5
    assert len(set(round(x, 6) for x in got)) > 1  # a trained head: rewards differ between responses


def test_code_prompts_are_scored_by_the_sandbox_through_the_combined_scorer(tmp_path):
    from training.prompt_sets import code_prompts

    require_some_isolation()
    path = tmp_path / "code.jsonl"
    path.write_text('{"task_id": 7, "text": "Write a function to double a number.", '
                    '"test_list": ["assert double(2) == 4", "assert double(-1) == -2"], "test_setup_code": ""}\n')
    (p,) = code_prompts(path)
    assert p["id"] == "code-7" and p["type"] == "code" and "assert" not in p["messages"][0]["content"]
    scorer = RewardScorer(RewardConfig())
    try:
        out = scorer.score([p, p], ["```python\ndef double(x):\n    return 2 * x\n```", "def double(x): return x + 2"])
    finally:
        scorer.close()
    assert [o["reward"] for o in out] == [1.0, 0.5]  # x + 2 passes double(2) == 4 only
    with pytest.raises(RecordError, match=r"code.jsonl \[record 0\]: a code prompt needs"):
        path.write_text('{"text": "no tests"}\n')
        code_prompts(path)


def test_a_code_prompts_reference_solution_names_its_entry_points(tmp_path):
    # MBPP rows carry a reference (`code`): the task's entry points come from it, a builtin's name included.
    from training.prompt_sets import code_prompts

    path = tmp_path / "code.jsonl"
    row = {"task_id": 126, "text": "Sum of common divisors.", "test_list": ["assert sum(10, 15) == 6"],
           "code": "def sum(a, b):\n    return helper(a, b)\ndef helper(a, b):\n    return 6\n"}
    path.write_text(json.dumps(row) + "\n")
    (p,) = code_prompts(path)
    assert p["reference"]["entry_points"] == ["sum"]
