"""Our chat template, and conversations -> token ids with a per-token loss mask.

The template (plain-text markers, so it works with any tokenizer, bytes included):

    <|system|>\n{system text}[\n<|tools|>\n{JSON list of the tools offered}]<|end|>\n
    <|user|>\n{text}<|end|>\n
    <|assistant|>\n{text}<|end|>\n
    <|assistant|>\n<|tool_call|>{"arguments": {...}, "name": "..."}\n...<|end|>\n
    <|tool|>\n{tool output}<|end|>\n

A tool call is the JSON object `{"name", "arguments"}` with sorted keys, as the tool-use generator
(synth/stages/tools_examples.py) writes its `calls` column. Each turn is rendered as (header, body): the header
(`<|assistant|>\n`) is the prompt a generator is given and is never trained on; the body and its `<|end|>`
are trained on when the turn's role is in `loss_on` (default: assistant turns only), so the model learns to
stop. Segments are tokenized separately and concatenated, so a mask boundary is exactly a segment boundary
(for subword tokenizers the ids can differ slightly from tokenizing the whole string at once).

The chat format follows the tokenizer, as a Hugging Face chat template belongs to its tokenizer: a tokenizer
that has ChatML's `<|im_start|>` and `<|im_end|>` as single tokens (an imported SmolLM2 or Qwen checkpoint,
instruction-tuned in ChatML) gets the same turns in ChatML (`<|im_start|>{role}\n{text}<|im_end|>\n`), so
post-training continues in the format the model already answers and stops in; every other tokenizer (bytes,
the project's SentencePiece models) gets the template above. `chat_format(tokenizer)` decides, once per
tokenizer object. ChatML's optional default system prompts (SmolLM2's, Qwen's) are not added.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from manifests.errors import ConfigError, RecordError

ROLES = ("system", "user", "assistant", "tool")


def record_error(where: str, reason: str) -> RecordError:
    """`where` = "FILE record N" (or any label) -> the project's RecordError(path, where, reason)."""
    path, sep, rec = where.partition(" record ")
    return RecordError(path, f"record {rec}" if sep else "-", reason)
END = "<|end|>\n"
TOOL_CALL = "<|tool_call|>"


@dataclass(frozen=True)
class ChatFormat:
    """How turns are written: `header` (with `{role}`) opens a turn, `end` closes it."""

    name: str  # recorded in tokenized SFT versions and checkpoint manifests
    header: str
    end: str

    def open(self, role: str) -> str:
        return self.header.format(role=role)

    @property
    def end_marker(self) -> str:
        """The end of a turn without its newline: the stop sequence of a generated response."""
        return self.end.rstrip("\n")


CIDERMILL = ChatFormat("cidermill-chat-v1", "<|{role}|>\n", END)
CHATML = ChatFormat("chatml-v1", "<|im_start|>{role}\n", "<|im_end|>\n")
END_MARKERS = (CIDERMILL.end_marker, CHATML.end_marker)  # what ends a decoded response, in any format
# The project's template as a transformers chat template (Jinja), written into Hugging Face exports of
# checkpoints with the project's tokenizers, so `apply_chat_template` and chat servers prompt an export as it
# was trained. Plain turns only: tools and tool calls are written by `render`, not by this template.
CIDERMILL_JINJA = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
                   "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def chat_format(tokenizer) -> ChatFormat:
    """CHATML when the tokenizer has both ChatML markers as single tokens, else CIDERMILL (module docstring).
    Kept on the tokenizer object after the first call."""
    fmt = getattr(tokenizer, "_cidermill_chat_format", None)
    if fmt is None:
        fmt = CHATML if all(len(tokenizer.encode(m)) == 1 for m in ("<|im_start|>", "<|im_end|>")) else CIDERMILL
        try:
            tokenizer._cidermill_chat_format = fmt
        except AttributeError:  # a tokenizer without instance attributes: decided again next time
            pass
    return fmt


def response_text(text: str) -> str:
    """A decoded response up to its first end-of-turn marker (either format)."""
    for marker in END_MARKERS:
        text = text.split(marker, 1)[0]
    return text


@dataclass(frozen=True, kw_only=True)
class TemplateConfig:
    loss_on: tuple[str, ...] = ("assistant",)  # roles whose turn bodies carry loss
    max_length: int | None = None  # conversations longer than this are cut (counted), None: keep all

    def __post_init__(self):
        bad = set(self.loss_on) - set(ROLES)
        if bad or not self.loss_on:
            raise ConfigError(f"template.loss_on must be a non-empty subset of {ROLES}; got {list(self.loss_on)}")


class ByteTokenizer:
    """UTF-8 bytes as ids 0..255, the tokenizer of the tiny CPU runs (training.byte_mixture)."""

    vocab_size = 256
    eod_id = 0
    pad_id = 0
    name = "utf8-bytes"

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")

    def describe(self) -> dict:
        return {"name": self.name, "kind": "bytes", "vocab_size": self.vocab_size, "eod_id": self.eod_id}


def load_tokenizer(spec: str):
    """`bytes`, or a tokenizer file (SentencePiece .model / Hugging Face tokenizer.json) via corpus.mix.tokenizer."""
    if spec == "bytes":
        return ByteTokenizer()
    from pathlib import Path

    from corpus.mix.tokenizer import tokenizer_from_bytes

    path = Path(spec)
    if not path.is_file():
        raise ConfigError(f"tokenizer {spec!r}: neither 'bytes' nor a tokenizer file")
    return tokenizer_from_bytes(path.read_bytes(), name=path.name)


def format_tool_call(call: dict) -> str:
    return json.dumps({"name": call["name"], "arguments": call.get("arguments", {})}, ensure_ascii=False,
                      sort_keys=True)


def render(messages: Sequence[dict], *, tools: Sequence[dict] | None = None,
           fmt: ChatFormat = CIDERMILL) -> list[tuple[str, str, str]]:
    """(role, header, body) per turn in `fmt`; the tools offered go into the system turn (one is made if absent)."""
    turns = []
    msgs = list(messages)
    if tools:
        tools_text = "<|tools|>\n" + json.dumps(list(tools), ensure_ascii=False, sort_keys=True)
        if msgs and msgs[0]["role"] == "system":
            msgs[0] = {**msgs[0], "content": msgs[0]["content"] + "\n" + tools_text}
        else:
            msgs.insert(0, {"role": "system", "content": tools_text})
    for m in msgs:
        role = m["role"]
        body = m.get("content") or ""
        if m.get("tool_calls"):
            calls = "\n".join(TOOL_CALL + format_tool_call(c.get("function", c)) for c in m["tool_calls"])
            body = (body + "\n" if body else "") + calls
        turns.append((role, fmt.open(role), body + fmt.end))
    return turns


@dataclass
class Tokenized:
    ids: np.ndarray  # [n] int64, the whole conversation
    trainable: np.ndarray  # [n] bool, token i is a target that carries loss
    truncated: bool = False


def tokenize(messages: Sequence[dict], tokenizer, template: TemplateConfig = TemplateConfig(), *,
             tools: Sequence[dict] | None = None, where: str = "conversation") -> Tokenized:
    """Token ids and which tokens carry loss. Refuses a conversation with no trainable token."""
    ids: list[int] = []
    mask: list[bool] = []
    for role, header, body in render(messages, tools=tools, fmt=chat_format(tokenizer)):
        h = tokenizer.encode(header)
        b = tokenizer.encode(body)
        ids += h + b
        mask += [False] * len(h) + [role in template.loss_on] * len(b)
    truncated = template.max_length is not None and len(ids) > template.max_length
    if truncated:
        ids, mask = ids[: template.max_length], mask[: template.max_length]
    out = Tokenized(np.asarray(ids, dtype=np.int64), np.asarray(mask, dtype=bool), truncated)
    # token 0 is never a target (nothing precedes it), so the loss sees trainable[1:]
    if not out.trainable[1:].any():
        raise record_error(where, f"no token carries loss (roles {sorted({m['role'] for m in messages})}, "
                          f"loss_on {list(template.loss_on)}{', cut at max_length' if truncated else ''}); "
                          "an all-zero loss mask would train on nothing")
    return out


# ---- records -> messages ------------------------------------------------------------------------------------

_SHAREGPT = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system",
             "observation": "tool", "tool": "tool", "function_call": "assistant"}


def _sharegpt_turn(turn: dict, where: str) -> dict:
    role = _SHAREGPT.get(turn.get("from"))
    if role is None:
        raise record_error(where, f"unknown turn role {turn.get('from')!r}")
    if turn.get("from") == "function_call":
        try:
            call = json.loads(turn["value"])
        except (json.JSONDecodeError, TypeError):
            raise record_error(where, "function_call turn is not JSON") from None
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    return {"role": role, "content": str(turn.get("value", ""))}


def _check(messages: list[dict], where: str) -> list[dict]:
    if not messages:
        raise record_error(where, "empty conversation")
    for m in messages:
        if m.get("role") not in ROLES:
            raise record_error(where, f"unknown role {m.get('role')!r} (known: {ROLES})")
        if not isinstance(m.get("content", ""), str) and m.get("content") is not None:
            raise record_error(where, f"content of a {m['role']} turn is not text")
    return messages


def record_messages(rec: dict, *, where: str) -> tuple[list[dict], list[dict] | None]:
    """(messages, tools) of an SFT record: `messages` (role/content, OpenAI style; a `label: false` record,
    as in KTO data, is refused by the reader), `conversations` (ShareGPT from/value), or a tool-use row
    (`messages`+`calls`/`response` JSON strings, synth/tools), or a single-turn row (SINGLE_TURN)."""
    tools = None
    if "calls" in rec and isinstance(rec.get("messages"), str):  # synth tool-use row
        try:
            msgs = json.loads(rec["messages"])
            tools = json.loads(rec["tools"]) if rec.get("tools") else None
            calls = json.loads(rec["calls"])
        except (TypeError, json.JSONDecodeError) as exc:
            raise record_error(where, f"a tool-use row's `messages`, `tools` or `calls` is not JSON ({exc})") from None
        if not isinstance(msgs, list) or not isinstance(calls, (list, type(None))):
            raise record_error(where, "a tool-use row's `messages` and `calls` must be JSON lists")
        msgs.append({"role": "assistant", "content": "", "tool_calls": calls} if calls
                    else {"role": "assistant", "content": rec.get("response", "")})
        return _check(msgs, where), tools
    if isinstance(rec.get("messages"), list):
        return _check([dict(m) for m in rec["messages"]], where), rec.get("tools")
    if isinstance(rec.get("conversations"), list):
        return _check([_sharegpt_turn(t, where) for t in rec["conversations"]], where), None
    for user, assistant in SINGLE_TURN:  # the synth generators' single-turn rows
        if user in rec and assistant in rec:
            if not isinstance(rec[user], str) or not isinstance(rec[assistant], str) or not rec[assistant]:
                raise record_error(where, f"`{user}`/`{assistant}` must be non-empty strings")
            return [{"role": "user", "content": rec[user]}, {"role": "assistant", "content": rec[assistant]}], None
    for key in ("messages", "conversations"):
        if key in rec:
            raise record_error(where, f"`{key}` must be a list of turns; got {type(rec[key]).__name__}")
    raise record_error(where, f"no `messages`, `conversations` or prompt/response fields (keys: {sorted(rec)[:8]})")


# (user field, assistant field) of single-turn rows: synth math CoT and long-context QA (prompt, response),
# summaries (prompt, summary), coding triplets (question, solution), Alpaca-style (instruction, output)
SINGLE_TURN = (("prompt", "response"), ("prompt", "summary"), ("question", "solution"), ("instruction", "output"))
