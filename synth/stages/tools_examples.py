"""The tool-use SFT row and the extraction of single-call examples and negatives from dialogues.

A row: `tools` (JSON list offered to the model), `messages` (JSON chat prefix ending with the user
turn), `calls` (JSON list of {name, arguments}; empty for a negative), `response` (the assistant's
plain answer for a negative), `kind` (single | bootstrap | parallel | negative).

From a dialogue:
- single: for each function call, the conversation up to the user turn before it, and the call;
- negative: a dialogue that offers tools but never calls one (a request that needs no tool, e.g.
  "write MATLAB code for a rocket's trajectory" with a `convert_currency` tool offered) -> the
  first user turn and the assistant's answer. These teach the model not to over-trigger.
"""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa

from corpus.registry import register
from corpus.stage import NoConfig
from manifests.errors import RecordError
from synth.generation.generator import Generator, schema_with_provenance
from synth.generation.llm import rule_provenance

from synth.tools.schema import parse_tools
from synth.tools.validate import validate_call

TOOL_SFT_SCHEMA = schema_with_provenance(
    pa.field("tools", pa.string()), pa.field("messages", pa.string()), pa.field("calls", pa.string()),
    pa.field("response", pa.string()), pa.field("kind", pa.string()), pa.field("n_tools", pa.int32()),
    pa.field("oracle_tools", pa.string()),
)

_ROLE = {"human": "user", "gpt": "assistant", "function_call": "tool_call", "observation": "tool"}


def row_id(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


def make_row(*, source: str, tools: list[dict], messages: list[dict], calls: list[dict], kind: str,
             response: str = "", provenance: dict | None = None, salt: str = "") -> dict:
    m = json.dumps(messages, ensure_ascii=False)
    c = json.dumps(calls, ensure_ascii=False, sort_keys=True)
    return {"id": row_id(kind, m, c, salt), "source": source, "tools": json.dumps(tools, ensure_ascii=False),
            "messages": m, "calls": c, "response": response, "kind": kind, "n_tools": len(tools),
            "oracle_tools": json.dumps(sorted({x["name"] for x in calls})),
            **(provenance or rule_provenance(f"tool_{kind}"))}


def examples_from_dialogue(source: str, tools_text: str, conv_text: str) -> tuple[list[dict], list[str]]:
    """(rows, reasons for calls that were dropped)."""
    tools = parse_tools(tools_text, where=source)
    turns = json.loads(conv_text)
    rows, reasons, prefix = [], [], []
    calls_seen = False
    for turn in turns:
        role = _ROLE.get(turn.get("from"))
        if role is None:
            raise RecordError(str(source), "-", f"unknown turn role {turn.get('from')!r}")
        if role == "tool_call":
            calls_seen = True
            try:
                call = json.loads(turn["value"])
            except json.JSONDecodeError:
                reasons.append("seed_call_not_json")
                continue
            reason = validate_call(call, tools)
            if reason:
                reasons.append(f"seed_{reason}")  # a broken seed call is not an example to learn from
            elif prefix and prefix[-1]["role"] == "user":
                rows.append(make_row(source=source, tools=tools, messages=list(prefix),
                                     calls=[{"name": call["name"], "arguments": call["arguments"]}], kind="single"))
            prefix.append({"role": "assistant", "content": "", "tool_calls": [call]})
        else:
            prefix.append({"role": role, "content": turn.get("value", "")})
    if tools and not calls_seen:
        first_user = next((i for i, m in enumerate(prefix) if m["role"] == "user"), None)
        if first_user is not None and first_user + 1 < len(prefix) and prefix[first_user + 1]["role"] == "assistant":
            rows.append(make_row(source=source, tools=tools, messages=prefix[: first_user + 1], calls=[],
                                 kind="negative", response=prefix[first_user + 1]["content"]))
    return rows, reasons


@register
class ToolExamples(Generator):
    """Dialogues (tools, conversations) -> single-call examples and tool-intent negatives."""

    name = "tool_examples_v1"
    Config = NoConfig
    schema = TOOL_SFT_SCHEMA

    def expand(self, table: pa.Table) -> tuple[list[dict], list[tuple[int, str]]]:
        rows, dropped = [], []
        for i, rec in enumerate(table.select(["source", "tools", "conversations"]).to_pylist()):
            try:
                got, reasons = examples_from_dialogue(rec["source"], rec["tools"], rec["conversations"])
            except RecordError:
                dropped.append((i, "bad_dialogue"))
                continue
            rows += got
            dropped += [(i, r) for r in reasons]
            if not got and not reasons:
                dropped.append((i, "no_example"))
        return rows, dropped
