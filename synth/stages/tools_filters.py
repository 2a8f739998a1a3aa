"""The last word on tool rows: every call valid against the tools the row offers; negatives
really carry no call and an answer; the oracle tools are among those offered."""

from __future__ import annotations

import json

import pyarrow as pa

from corpus.registry import register
from corpus.stage import Filter

from synth.tools.validate import calls_error


def row_check(r: dict) -> tuple[str | None, dict | None]:
    """(reason, evidence): the parse error, what a negative carries, or the failing call's rule."""
    try:
        tools, calls = json.loads(r["tools"]), json.loads(r["calls"])
    except (json.JSONDecodeError, TypeError) as e:
        return "row_not_json", {"error": str(e)[:120]}
    if r["kind"] == "negative":
        answer = (r.get("response") or "").strip()
        if not calls and answer:
            return None, None
        return "negative_with_call", {"calls": len(calls) if isinstance(calls, list) else 1,
                                      "response_chars": len(answer)}
    if not calls:
        return "no_call", {"calls": 0, "kind": r["kind"]}
    return calls_error(calls, tools)


def row_reason(r: dict) -> str | None:
    return row_check(r)[0]


@register
class ToolCallValidate(Filter):
    name = "tool_call_validate_v1"

    def reasons(self, table: pa.Table) -> tuple[pa.Array, list]:
        checked = [row_check(r) for r in table.select(["tools", "calls", "kind", "response"]).to_pylist()]
        return pa.array([r for r, _ in checked], pa.string()), [e for _, e in checked]
