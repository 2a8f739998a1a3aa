"""A policy checkpoint ready for rollouts: the megatron model, its tokenizer, and the chat-template ids a
generator needs (the assistant header that opens a response, the end marker that closes it: `<|end|>`, or
`<|im_end|>` for a ChatML tokenizer; training.chat.chat_format)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..chat import chat_format, render
from ..config import ConfigError


@dataclass
class Policy:
    model: object  # megatron GPTModel, eval mode
    tokenizer: object  # encode(text) -> ids, decode(ids) -> text
    checkpoint: Path
    manifest: dict

    @property
    def eos_id(self) -> int:
        return int(getattr(self.tokenizer, "eod_id", 0))

    def stop_sequences(self) -> list[list[int]]:
        """The template's end-of-turn marker: a response ends when it writes it."""
        return stop_sequences(self.tokenizer)

    def prompt_ids(self, messages: Sequence[dict], *, tools: Sequence[dict] | None = None) -> list[int]:
        return chat_prompt_ids(messages, self.tokenizer, tools=tools)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))


def stop_sequences(tokenizer) -> list[list[int]]:
    """The ids of the chat format's end-of-turn marker (`<|end|>` or ChatML's `<|im_end|>`)."""
    return [tokenizer.encode(chat_format(tokenizer).end_marker)]


def chat_prompt_ids(messages: Sequence[dict], tokenizer, *, tools: Sequence[dict] | None = None) -> list[int]:
    """The conversation so far in our chat template, followed by the assistant header a response continues;
    tokenized per segment exactly as training.chat.tokenize does, so training and rollouts see the same ids."""
    if not messages or messages[-1]["role"] == "assistant":
        raise ConfigError("a rollout prompt must end with a user (or tool) turn, not an assistant turn")
    fmt = chat_format(tokenizer)
    ids: list[int] = []
    for _role, header, body in render(messages, tools=tools, fmt=fmt):
        ids += tokenizer.encode(header) + tokenizer.encode(body)
    return ids + tokenizer.encode(fmt.open("assistant"))


def load_policy(checkpoint: str | Path, *, max_length: int = 2048, sdpa: bool = True) -> Policy:
    """A post-training checkpoint (SFT, RS, DPO, RL) or pretraining checkpoint; TP=1 on this machine's device.
    `sdpa`: with local kernels, the fused scaled-dot-product core attention of training/model/sdpa.py (same
    parameters, logits equal the stock module's; the rollout tests check both give the same rollouts)."""
    from .. import parallel
    from ..checkpoint import open_checkpoint
    from ..trainer import load_model

    info = open_checkpoint(checkpoint)
    kernels = info.manifest.get("kernels", "local")
    parallel.setup(parallel.ParallelConfig(kernels=kernels))
    if sdpa and kernels == "local":
        from ..model.sdpa import build_eval_model

        model = build_eval_model(info, seq_length=max_length)
    else:
        model, info = load_model(info.directory, seq_length=max_length, parallel_output=False)
    model.eval()
    return Policy(model=model, tokenizer=policy_tokenizer(info), checkpoint=info.directory, manifest=info.manifest)


def policy_tokenizer(info):
    """A checkpoint's tokenizer without building its model: the one it recorded and carries."""
    from ..checkpoint import load_checkpoint_tokenizer

    return load_checkpoint_tokenizer(info)
