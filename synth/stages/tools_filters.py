"""The last word on tool rows: every call valid against the tools the row offers; negatives
really carry no call and an answer; the oracle tools are among those offered."""

from __future__ import annotations

import json

import pyarrow as pa

from corpus.registry import register
from corpus.stage import Filter

from synth.tools.validate import validate_calls


def row_reason(r: dict) -> str | None:
    try:
        tools, calls = json.loads(r["tools"]), json.loads(r["calls"])
    except (json.JSONDecodeError, TypeError):
        return "row_not_json"
    if r["kind"] == "negative":
        return None if not calls and (r.get("response") or "").strip() else "negative_with_call"
    if not calls:
        return "no_call"
    return validate_calls(calls, tools)


@register
class ToolCallValidate(Filter):
    name = "tool_call_validate_v1"

    def reasons(self, table: pa.Table) -> pa.Array:
        return pa.array([row_reason(r) for r in table.select(["tools", "calls", "kind", "response"]).to_pylist()],
                        pa.string())
