"""Tool calls in Python call syntax, checked BFCL's way: shared by the BFCL evaluation (evals/model/posttrain.py)
and the tool reward (training/rewards/rules.py).

`parse_calls` reads `[f(a=1, b="x"), g(c=2.5)]` with `ast` (no eval); `bfcl_correct` applies the project's AST
checker (synth.tools.ast_check: names, parameters, allowed values, parallel calls as a set) plus BFCL's type
rule: an int is accepted for a float parameter (coerced), a float for an integer parameter is not.
"""

from __future__ import annotations

import ast

from synth.tools.ast_check import calls_match


def parse_calls(text: str) -> list[dict] | None:
    """`[f(a=1), g(b="x")]` or `f(a=1)` -> [{"name", "arguments"}]; None if not parseable as calls."""
    text = text.strip()
    if "[" in text and "]" in text:
        text = text[text.index("["): text.rindex("]") + 1]
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    nodes = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
    calls = []
    for n in nodes:
        if not isinstance(n, ast.Call) or n.args:
            return None
        try:
            args = {kw.arg: ast.literal_eval(kw.value) for kw in n.keywords}
        except ValueError:
            return None
        calls.append({"name": ast.unparse(n.func), "arguments": args})
    return calls


def _types_ok(call: dict, functions: list[dict]) -> bool:
    spec = next((f for f in functions if f["name"] == call["name"]), None)
    if spec is None:
        return True  # the name check fails later
    props = spec.get("parameters", {}).get("properties", {})
    for k, v in call["arguments"].items():
        t = props.get(k, {}).get("type")
        if t == "integer" and (isinstance(v, float) or isinstance(v, bool)):
            return False  # BFCL: no float (or bool) for an integer parameter
        if t == "float" and not isinstance(v, (int, float)) or (t == "float" and isinstance(v, bool)):
            return False  # ints are coerced to float; anything else is a type error
    return True


def bfcl_correct(pred: list[dict] | None, truths: list[dict], functions: list[dict]) -> bool:
    return pred is not None and all(_types_ok(c, functions) for c in pred) and calls_match(pred, truths)
