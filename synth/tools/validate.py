"""Validate a tool call against the tools offered: the validator every generated call must pass.

A call is `{"name": str, "arguments": {..}}` (arguments may arrive as a JSON string). The result is
None when valid, else one reason: `malformed_call`, `arguments_not_json`, `unknown_tool`,
`missing_required`, `unknown_argument`, `wrong_type`, `invalid_value` (enum, range, pattern ...).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator

from synth.tools.schema import arguments_schema


@lru_cache(maxsize=4096)
def _validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json))


def _reason(error) -> str:
    if error.validator == "required":
        return "missing_required"
    if error.validator == "additionalProperties":
        return "unknown_argument"
    if error.validator == "type":
        return "wrong_type"
    return "invalid_value"


def call_error(call: Any, tools: list[dict]) -> tuple[str | None, dict | None]:
    """(reason, evidence) for a call: None, None when valid; else the reason and what broke it: the
    tool's name, and for a schema failure the rule (`required`, `type`, `enum` ...), the argument's
    path and the validator's message (clipped), so a reject says which argument failed which rule."""
    if not isinstance(call, dict) or not isinstance(call.get("name"), str) or "arguments" not in call:
        return "malformed_call", {"error": "not an object with a string name and arguments",
                                  "call": json.dumps(call, ensure_ascii=False, default=str)[:120]}
    args = call["arguments"]
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError as e:
            return "arguments_not_json", {"name": call["name"], "error": str(e)[:120]}
    if not isinstance(args, dict):
        return "malformed_call", {"name": call["name"], "error": f"arguments are a {type(args).__name__}"}
    tool = next((t for t in tools if t["name"] == call["name"]), None)
    if tool is None:
        return "unknown_tool", {"name": call["name"], "offered": sorted(t["name"] for t in tools)[:5]}
    schema = arguments_schema(tool)
    errors = sorted(_validator(json.dumps(schema, sort_keys=True)).iter_errors(args),
                    key=lambda e: (len(e.absolute_path), e.validator != "required"))
    if not errors:
        return None, None
    e = errors[0]
    return _reason(e), {"name": call["name"], "rule": e.validator,
                        "path": "/".join(str(p) for p in e.absolute_path), "error": e.message[:120]}


def validate_call(call: Any, tools: list[dict]) -> str | None:
    return call_error(call, tools)[0]


def calls_error(calls: Any, tools: list[dict]) -> tuple[str | None, dict | None]:
    """Every call of a (possibly parallel) list must be valid; the first failure decides (with its
    position in the list as `call`)."""
    if not isinstance(calls, list):
        return "malformed_call", {"error": f"calls are a {type(calls).__name__}, not a list"}
    for k, call in enumerate(calls):
        reason, found = call_error(call, tools)
        if reason:
            return reason, {"call": k, **found}
    return None, None


def validate_calls(calls: Any, tools: list[dict]) -> str | None:
    return calls_error(calls, tools)[0]


def parse_call_text(text: str) -> Any:
    """A model's call as text -> the parsed object, or None when it is not JSON at all.

    Accepts a bare JSON object/list or one inside a ```json fence; takes the outermost braces so
    that chatter around the call does not hide it."""
    text = (text or "").strip()
    if "```" in text:
        parts = text.split("```")
        text = max(parts[1::2], key=len, default=text).removeprefix("json").strip()
    start = min([i for i in (text.find("{"), text.find("[")) if i >= 0], default=-1)
    if start < 0:
        return None
    end = max(text.rfind("}"), text.rfind("]"))
    try:
        return json.loads(text[start:end + 1])
    except json.JSONDecodeError:
        return None
