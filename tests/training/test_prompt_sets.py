"""Prompt sets over shipped data: each row's type, visible messages and hidden reference, checked by hand
against the first records of the files; the reference never appears in what the policy sees."""

from __future__ import annotations

import json

import pytest

from manifests.errors import RecordError
from training.chat import format_tool_call
from training.prompt_sets import (INSTRUCTIONS, SAMPLES, glaive_tool_prompts, gsm8k_prompts, preference_prompts,
                                  with_instructions)
from training.rewards import instruction_reward, tool_reward


def test_gsm8k_rows_hold_the_answer_out_of_the_prompt(tmp_path):
    rows = gsm8k_prompts(limit=2)
    # train_short64.jsonl records 0 and 1: "... 3 books that are 400 pages each?" (#### 60), beef (#### 110)
    assert [(r["id"], r["type"], r["reference"]) for r in rows] == \
        [("gsm8k-0", "math", {"answer": "60"}), ("gsm8k-1", "math", {"answer": "110"})]
    assert rows[0]["messages"][0]["content"].startswith("John writes 20 pages a day.")
    assert all("####" not in r["messages"][0]["content"] for r in rows)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "no final line"}\n')
    with pytest.raises(RecordError, match=r"bad.jsonl \[record 0\]: a GSM8K record needs"):
        gsm8k_prompts(bad)


def test_glaive_rows_stop_before_the_first_call_and_keep_it_as_bfcl_answers():
    (row,) = glaive_tool_prompts(limit=1)
    assert row["type"] == "tool" and row["messages"][-1] == {"role": "user",
                                                            "content": "I have chicken, bell peppers, and rice."}
    assert [m["role"] for m in row["messages"]] == ["user", "assistant", "user"]
    assert row["reference"] == {"calls": [{"search_recipes": {"ingredients": [["chicken", "bell peppers", "rice"]]}}]}
    assert [t["name"] for t in row["tools"]] == ["search_recipes"]
    gold = "<|tool_call|>" + format_tool_call({"name": "search_recipes",
                                               "arguments": {"ingredients": ["chicken", "bell peppers", "rice"]}})
    assert tool_reward(gold, row["reference"], row["tools"]).value == 1.0
    assert tool_reward(gold.replace("rice", "pasta"), row["reference"], row["tools"]).value == 0.0


def test_instruction_rows_are_seeded_and_checkable():
    chat = preference_prompts(SAMPLES / "preference/llamafactory/dpo_en_demo.json.gz", limit=6)
    assert len({r["messages"][0]["content"] for r in chat}) == 6  # distinct prompts
    a, b = with_instructions(chat, seed=1), with_instructions(chat, seed=1)
    assert a == b and all(r["type"] == "instruction" for r in a)
    texts = {iid: text for iid, _, text in INSTRUCTIONS}
    for r in a:
        (iid,) = r["reference"]["instruction_id_list"]
        assert r["messages"][0]["content"].endswith("\n" + texts[iid])
    lower = next(r for s in range(20) for r in with_instructions(chat, seed=s)
                 if r["reference"]["instruction_id_list"] == ["change_case:english_lowercase"])
    assert instruction_reward("all lowercase", lower["reference"]).value == 1.0
    assert instruction_reward("Not all", lower["reference"]).value == 0.0
    assert json.dumps(a)  # rows are plain JSON (the iTeC caches and catalog rows store them)
