"""Bootstrap new single-tool examples with an LLM: given a tool and one real example of its use,
write a different request and the call that serves it, as JSON. Every reply is parsed and the call
validated against the tool's schema before it is kept; the request must not be a copy."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass

import pyarrow as pa

from corpus.registry import register
from synth.generation.generator import Generator
from synth.generation.llm import LLMConfig, generate, get_backend
from synth.generation.template import PromptTemplate

from synth.stages.tools_examples import TOOL_SFT_SCHEMA, make_row
from synth.tools.validate import call_error, parse_call_text

BOOTSTRAP = PromptTemplate(
    id="tool_bootstrap", version="v1",
    system="You write training examples for an assistant that calls tools. Reply with JSON only.",
    user='Tool:\n{tool}\n\nExample request: {request}\nExample call: {call}\n\n'
         'Write a new, different user request for this tool and the call that answers it. Reply as JSON: '
         '{{"request": "...", "call": {{"name": "{name}", "arguments": {{...}}}}}}',
)


@dataclass(frozen=True, kw_only=True)
class BootstrapConfig(LLMConfig):
    max_tokens: int = 160
    temperature: float = 0.8
    max_seeds: int = 1000

    def __post_init__(self):
        super().__post_init__()


MAX_REQUEST_SIMILARITY = 0.85  # a request this close to the seed's (difflib ratio) is a copy, not a new example


def check_bootstrap(reply: str, tool: dict, seed_request: str) -> tuple[dict | None, str | None, dict | None]:
    """(example, reason, evidence): the evidence names the unparsable reply, the call's failed rule, or
    the similarity to the seed request and its limit."""
    obj = parse_call_text(reply)
    if not isinstance(obj, dict) or not isinstance(obj.get("request"), str) or not obj["request"].strip():
        return None, "reply_not_json", {"error": "no JSON object with a non-empty request", "reply": reply}
    call = obj.get("call")
    if isinstance(call, dict) and "name" not in call:
        call = {"name": tool["name"], "arguments": call.get("arguments", call)}
    reason, found = call_error(call, [tool])
    if reason:
        return None, reason, found
    similarity = difflib.SequenceMatcher(None, obj["request"].lower(), seed_request.lower()).ratio()
    if similarity > MAX_REQUEST_SIMILARITY:
        return None, "copied_request", {"similarity": similarity, "max": MAX_REQUEST_SIMILARITY,
                                        "request": obj["request"]}
    args = call["arguments"] if isinstance(call["arguments"], dict) else json.loads(call["arguments"])
    return {"request": obj["request"].strip(), "call": {"name": call["name"], "arguments": args}}, None, None


@register
class BootstrapExamples(Generator):
    """Passes rows through; for single-call rows with a one-turn request, adds an LLM-written one."""

    name = "tool_bootstrap_v1"
    Config = BootstrapConfig
    schema = TOOL_SFT_SCHEMA

    def expand(self, table: pa.Table) -> tuple[list[dict], list[tuple[int, str]]]:
        c = self.config
        rows = table.select(TOOL_SFT_SCHEMA.names).to_pylist()
        seeds = []
        for i, r in enumerate(rows):
            msgs, calls = json.loads(r["messages"]), json.loads(r["calls"])
            if r["kind"] == "single" and len(msgs) == 1 and len(calls) == 1 and len(seeds) < c.max_seeds:
                tool = next(t for t in json.loads(r["tools"]) if t["name"] == calls[0]["name"])
                seeds.append((i, tool, msgs[0]["content"], calls[0]))
        params = c.sampling()
        items = [{"tool": json.dumps(t), "request": q, "call": json.dumps(call), "name": t["name"]}
                 for _, t, q, call in seeds]
        responses = generate(get_backend(c.backend), BOOTSTRAP, items, params=params)
        out, dropped = list(rows), []
        for (i, tool, q, _), resp in zip(seeds, responses):
            if resp.error:
                dropped.append((i, "bootstrap_llm_error", {"error": resp.error}))
                continue
            got, reason, found = check_bootstrap(resp.text, tool, q)
            if reason:
                dropped.append((i, f"bootstrap_{reason}", found))
                continue
            out.append(make_row(source=rows[i]["source"], tools=[tool],
                                messages=[{"role": "user", "content": got["request"]}], calls=[got["call"]],
                                kind="bootstrap", provenance=resp.provenance()))
        return out, dropped
