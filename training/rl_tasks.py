"""Verifiable prompts for RL: reading prompt records, and the single-digit addition task of the CPU demo.

A prompt record is `{"messages": [...turns before the answer...], "answer": "..."}` (the SFT readers'
`messages` / `conversations` forms are accepted); GSM8K rows `{"question", "answer": "... #### 42"}` are
read as one user turn with the number after `####` as the answer. The prompt ids are the chat template's
rendering of the turns followed by the assistant header, so the policy answers as it was SFT'd to.

The rule reward (`answer_reward`) is the project's math answer check (training.rewards.rules.math_reward)
on the response up to the template's end marker: 1.0 when its final answer equals the reference, else 0.0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .chat import chat_format, record_error, record_messages, render, response_text


@dataclass(frozen=True)
class Prompt:
    ids: tuple[int, ...]
    answer: str
    text: str  # the rendered prompt, for logs


def record_prompt(rec: dict, tokenizer, *, where: str) -> Prompt:
    if "question" in rec and "messages" not in rec:  # GSM8K
        answer = str(rec.get("answer", "")).rpartition("####")[2].strip().replace(",", "")
        messages = [{"role": "user", "content": str(rec["question"])}]
    else:
        messages, _ = record_messages(rec, where=where)
        answer = str(rec.get("answer", "")).strip()
    if not answer:
        raise record_error(where, "no `answer` to check responses against")
    if messages[-1]["role"] == "assistant":
        raise record_error(where, "the prompt's last turn is an assistant turn; give the turns before the answer")
    fmt = chat_format(tokenizer)
    text = "".join(h + b for _, h, b in render(messages, fmt=fmt)) + fmt.open("assistant")
    return Prompt(tuple(tokenizer.encode(text)), answer, text)


def answer_reward(response: str, answer: str) -> float:
    """The project's math rule reward (training.rewards.rules.math_reward: a stated final answer, else the
    last number, compared by synth.math.answers' equivalence) on the response up to the end marker."""
    from .rewards.rules import math_reward

    return math_reward(response_text(response), {"answer": answer}).value


def addition_records(n: int, *, seed: int, with_answer: bool, high: int = 9) -> list[dict]:
    """n additions "a+b" of digits 0..high (seeded); with_answer adds the assistant turn (SFT data),
    otherwise the record is a prompt with its checked answer."""
    rng = np.random.default_rng(seed)
    out = []
    for a, b in rng.integers(0, high + 1, size=(n, 2)):
        msgs = [{"role": "user", "content": f"{a}+{b}"}]
        if with_answer:
            msgs.append({"role": "assistant", "content": str(a + b)})
        out.append({"messages": msgs, "answer": str(a + b)})
    return out
