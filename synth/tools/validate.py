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


def validate_call(call: Any, tools: list[dict]) -> str | None:
    if not isinstance(call, dict) or not isinstance(call.get("name"), str) or "arguments" not in call:
        return "malformed_call"
    args = call["arguments"]
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return "arguments_not_json"
    if not isinstance(args, dict):
        return "malformed_call"
    tool = next((t for t in tools if t["name"] == call["name"]), None)
    if tool is None:
        return "unknown_tool"
    schema = arguments_schema(tool)
    errors = sorted(_validator(json.dumps(schema, sort_keys=True)).iter_errors(args),
                    key=lambda e: (len(e.absolute_path), e.validator != "required"))
    return _reason(errors[0]) if errors else None


def validate_calls(calls: Any, tools: list[dict]) -> str | None:
    """Every call of a (possibly parallel) list must be valid; the first failure is the reason."""
    if not isinstance(calls, list):
        return "malformed_call"
    for call in calls:
        reason = validate_call(call, tools)
        if reason:
            return reason
    return None


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
