"""Tool descriptions -> strict JSON Schema for their arguments.

Seeds describe tools in JSON-schema style (glaive: `type: object`) or in BFCL's OpenAPI-like
dialect (`type: dict`, `float`, `tuple`, `any`). `arguments_schema(tool)` maps both onto JSON Schema
and closes objects (`additionalProperties: false`), because an argument the tool does not declare
is a hallucinated argument, not a harmless extra.
"""

from __future__ import annotations

import json
from typing import Any

from manifests.errors import RecordError

_TYPE_MAP = {"dict": "object", "float": "number", "double": "number", "int": "integer", "tuple": "array",
             "list": "array", "str": "string", "bool": "boolean", "any": None, "long": "integer"}


def _convert(node: Any, *, close: bool) -> Any:
    if isinstance(node, list):
        return [_convert(n, close=close) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "type":
            if isinstance(value, list):
                mapped = [_TYPE_MAP.get(v, v) for v in value]
                if None in mapped:
                    continue
                out["type"] = mapped
            else:
                mapped = _TYPE_MAP.get(value, value)
                if mapped is not None:
                    out["type"] = mapped
        elif key == "properties" and isinstance(value, dict):
            out["properties"] = {k: _convert(v, close=close) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf"):
            out[key] = _convert(value, close=close)
        elif key == "required" and isinstance(value, list):
            out["required"] = list(value)
        elif key in ("enum", "minimum", "maximum", "minItems", "maxItems", "pattern", "format", "const"):
            out[key] = value
    if out.get("type") == "object" and close and "additionalProperties" not in out and "properties" in out:
        out["additionalProperties"] = False
    return out


def arguments_schema(tool: dict, *, close: bool = True) -> dict:
    params = tool.get("parameters") or {"type": "object", "properties": {}}
    schema = _convert(params, close=close)
    schema.setdefault("type", "object")
    return schema


def parse_tools(text: str | list, *, where: str) -> list[dict]:
    """A tools list (JSON text or list) -> [{name, description, parameters}], checked."""
    try:
        tools = json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError as exc:
        raise RecordError(str(where), "tools", f"not valid JSON ({exc})") from None
    if isinstance(tools, dict):
        tools = [tools]
    if not isinstance(tools, list):
        raise RecordError(str(where), "tools", f"must be a JSON list, got {type(tools).__name__}")
    out = []
    for t in tools:
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not t["name"]:
            raise RecordError(str(where), "tools", f"a tool without a name: {str(t)[:80]}")
        out.append({"name": t["name"], "description": str(t.get("description", "")),
                    "parameters": t.get("parameters") or {"type": "object", "properties": {}}})
    return out


def tool_text(tool: dict) -> str:
    """What distractor search embeds: the name (snake_case split) and the description."""
    return f"{tool['name'].replace('_', ' ').replace('.', ' ')}: {tool.get('description', '')}"
