"""Rule rewards: verifiable checks of a response against the prompt's `reference` (training/prompt_sets.py).
Each returns a RuleScore in [0, 1] plus what it decided on; none of them raises on a bad response (a response
that cannot be parsed scores 0 with the reason in `detail`). The checks are the ones the evaluations use, from
synth/checkers (one place each):

- math: extract_final, then the last number; answers_equal: normalised, numeric, symbolic;
- instruction: IFEval's `follows`, the fraction of the prompt's instructions followed (strict);
- tool: calls in our chat template (`<|tool_call|>{"name", "arguments"}` lines) or Python call syntax
  (`parse_calls`), checked by the BFCL AST checker (`bfcl_correct`);
- code: the sandbox judge's front door (`judge_code`; the verdict is decided outside the sandboxed solution),
  the fraction of tests passed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ..chat import TOOL_CALL


@dataclass(frozen=True)
class RuleScore:
    value: float
    detail: dict = field(default_factory=dict)


def math_reward(response: str, reference: dict) -> RuleScore:
    from synth.checkers import answers_equal, extract_final, numbers_in

    pred = extract_final(response)
    how = "stated"
    if pred is None:
        nums = numbers_in(response)
        pred, how = (nums[-1], "last number") if nums else (None, "none")
    gold = str(reference["answer"])
    return RuleScore(float(answers_equal(pred, gold)), {"pred": pred, "gold": gold, "extracted": how})


def instruction_reward(response: str, reference: dict) -> RuleScore:
    from synth.checkers import follows

    verdicts = follows({"instruction_id_list": reference["instruction_id_list"], "kwargs": reference["kwargs"]},
                       response)["strict"]
    return RuleScore(sum(verdicts) / max(1, len(verdicts)), {"strict": verdicts})


_CALL_LINE = re.compile(re.escape(TOOL_CALL) + r"\s*(\{.*\})\s*$")


def parse_tool_calls(response: str) -> list[dict] | None:
    """Our template's tool-call lines, else Python call syntax; None when neither parses."""
    calls = []
    for line in response.splitlines():
        m = _CALL_LINE.search(line.strip())
        if not m:
            continue
        try:
            call = json.loads(m.group(1))
        except json.JSONDecodeError:
            return None
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return None
        args = call.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                return None
        calls.append({"name": call["name"], "arguments": args})
    if calls:
        return calls
    from synth.checkers import parse_calls

    return parse_calls(response) if "(" in response else None


def tool_reward(response: str, reference: dict, tools: list[dict] | None) -> RuleScore:
    from synth.checkers import bfcl_correct

    pred = parse_tool_calls(response)
    ok = bfcl_correct(pred, reference["calls"], list(tools or []))
    return RuleScore(float(ok), {"calls": pred, "parsed": pred is not None})


_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.S)


def extract_code(response: str) -> str:
    """The fenced Python blocks of a response, joined; the whole response when it has none."""
    blocks = _FENCE.findall(response)
    return "\n\n".join(blocks) if blocks else response


def code_reward(response: str, reference: dict, sandbox) -> RuleScore:
    """reference: {"tests": [assert statements] or a test source, "prelude"?: trusted code, "entry_points"?}."""
    from synth.checkers import judge_code

    j = judge_code(extract_code(response), reference["tests"], prelude=reference.get("prelude", ""),
                   entry_points=reference.get("entry_points"), timeout_s=float(reference.get("timeout_s", 2.0)),
                   sandbox=sandbox)
    return RuleScore(j.n_passed / max(1, j.n_tests),
                     {"verdict": j.verdict, "passed": j.n_passed, "tests": j.n_tests, "reason": j.reason,
                      "isolation": j.isolation})
