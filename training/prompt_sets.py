"""Prompt sets for rollouts (iTeC, MDLOO): rows {id, type, messages, tools, reference}.

`type` picks the reward (training/rewards/combine.py): math | chat | tool | instruction | code. `reference`
holds what a rule reward checks against (a math answer, a gold tool call, IFEval instruction ids + kwargs,
code tests); it is never shown to the policy (only `messages` and `tools` are rendered into the prompt).

Readers over files shipped in data/samples (and any file of the same format):
- `gsm8k_prompts`: GSM8K train records {question, answer} -> math prompts; reference = the "#### N" answer.
- `preference_prompts`: the prompt side of preference records (llamafactory / hh_rlhf / alpaca_eval) -> chat.
- `glaive_tool_prompts`: ShareGPT tool dialogues, cut before the first function_call turn -> tool prompts;
  reference = that call as BFCL possible answers ({name: {param: [value]}}).
- `code_prompts`: {text | prompt | question, test_list | tests, test_setup_code?} records (MBPP's layout) ->
  code prompts; reference = the tests (and setup code as the judge's trusted prelude).
- `with_instructions`: chat prompts plus one verifiable instruction each (IFEval instruction ids, drawn with a
  seed from INSTRUCTIONS) -> instruction prompts; the request text is ours, the checker is synth/checkers/ifeval.py.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from manifests.errors import RecordError

from .post_loop import read_records

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "data" / "samples"
PROMPT_TYPES = ("math", "chat", "tool", "instruction", "code")
MATH_SUFFIX = "\nGive the final answer at the end as: The answer is N."

# (instruction id, kwargs, the sentence appended to the prompt)
INSTRUCTIONS = (
    ("change_case:english_lowercase", {}, "Your entire response must be in lowercase letters."),
    ("punctuation:no_comma", {}, "Do not use any commas in your response."),
    ("length_constraints:number_words", {"relation": "less than", "num_words": 40},
     "Answer in fewer than 40 words."),
    ("startend:end_checker", {"end_phrase": "Is there anything else I can help with?"},
     "End your response with the exact phrase: Is there anything else I can help with?"),
)


def _row(pid: str, ptype: str, messages: list[dict], *, tools=None, reference=None) -> dict:
    return {"id": pid, "type": ptype, "messages": messages, "tools": tools, "reference": reference or {}}


def gsm8k_prompts(path: str | Path = SAMPLES / "gsm8k" / "train_short64.jsonl", *,
                  limit: int | None = None) -> list[dict]:
    from synth.math.answers import gsm8k_final

    rows = []
    for i, rec in enumerate(read_records(path)[:limit]):
        if not isinstance(rec.get("question"), str) or gsm8k_final(str(rec.get("answer", ""))) is None:
            raise RecordError(str(path), f"record {i}", "a GSM8K record needs `question` and an answer ending '#### N'")
        rows.append(_row(f"gsm8k-{i}", "math", [{"role": "user", "content": rec["question"] + MATH_SUFFIX}],
                         reference={"answer": gsm8k_final(rec["answer"])}))
    return rows


def gsm8k_seed_prompts(*, limit: int | None = None) -> list[dict]:
    return gsm8k_prompts(limit=limit)


def preference_prompts(path: str | Path, *, fmt: str = "auto", limit: int | None = None,
                       max_chars: int = 600) -> list[dict]:
    """Distinct prompts (single-turn after cutting to the last user turn) no longer than max_chars."""
    from .prefs import record_pair

    rows, seen = [], set()
    for i, rec in enumerate(read_records(path)):
        pair = record_pair(rec, fmt=fmt, where=f"{path} record {i}")
        if pair is None or not pair.prompt or pair.prompt[-1]["role"] != "user":
            continue
        text = pair.prompt[-1]["content"].strip()
        if not text or len(text) > max_chars or text in seen:
            continue
        seen.add(text)
        rows.append(_row(f"{Path(path).name.split('.')[0]}-{i}", "chat", [{"role": "user", "content": text}]))
        if limit and len(rows) >= limit:
            break
    return rows


def glaive_tool_prompts(path: str | Path = SAMPLES / "glaive" / "glaive_toolcall_en_demo.json", *,
                        limit: int | None = None) -> list[dict]:
    from .chat import _sharegpt_turn

    rows = []
    for i, rec in enumerate(read_records(path)):
        where = f"{path} record {i}"
        turns = rec.get("conversations") or []
        k = next((j for j, t in enumerate(turns) if t.get("from") == "function_call"), None)
        if k is None or k == 0:
            continue  # no call to check
        try:
            tools = json.loads(rec["tools"]) if isinstance(rec.get("tools"), str) else rec.get("tools")
        except json.JSONDecodeError:
            raise RecordError(str(path), f"record {i}", "`tools` is not JSON") from None
        call = _sharegpt_turn(turns[k], where)["tool_calls"][0]
        args = call.get("arguments", {})
        if isinstance(args, str):
            args = json.loads(args)
        messages = [_sharegpt_turn(t, where) for t in turns[:k]]
        if messages[-1]["role"] != "user":
            continue
        rows.append(_row(f"glaive-{i}", "tool", messages, tools=tools,
                         reference={"calls": [{call["name"]: {p: [v] for p, v in args.items()}}]}))
        if limit and len(rows) >= limit:
            break
    return rows


def with_instructions(prompts: list[dict], *, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for p in prompts:
        iid, kwargs, text = INSTRUCTIONS[rng.randrange(len(INSTRUCTIONS))]
        msgs = [dict(m) for m in p["messages"]]
        msgs[-1]["content"] = msgs[-1]["content"] + "\n" + text
        out.append(_row(p["id"] + "-if", "instruction", msgs, tools=p.get("tools"),
                        reference={"instruction_id_list": [iid], "kwargs": [kwargs]}))
    return out


CODE_SUFFIX = "\nWrite the Python function in a ```python code block."


def code_prompts(path: str | Path, *, limit: int | None = None) -> list[dict]:
    from synth.checkers import reference_entry_points

    rows = []
    for i, rec in enumerate(read_records(path)[:limit]):
        text = rec.get("text") or rec.get("prompt") or rec.get("question")
        tests = rec.get("test_list") or rec.get("tests")
        if not isinstance(text, str) or not tests or not isinstance(tests, (list, str)):
            raise RecordError(str(path), f"record {i}", "a code prompt needs text (or prompt/question) and "
                                                       "test_list (or tests)")
        ref = {"tests": tests}
        if rec.get("test_setup_code"):
            ref["prelude"] = rec["test_setup_code"]
        if isinstance(rec.get("code"), str):   # a reference solution names the task's entry points (issue 36)
            ref["entry_points"] = reference_entry_points(rec["code"], tests, ref.get("prelude", ""))
        rows.append(_row(f"{Path(path).name.split('.')[0]}-{rec.get('task_id', i)}", "code",
                         [{"role": "user", "content": text + CODE_SUFFIX}], reference=ref))
    return rows
