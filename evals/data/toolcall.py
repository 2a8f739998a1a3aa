"""`cidermill eval data toolcall`: the tool-call validator and the AST check on BFCL v4.

Real calls: BFCL's ground truths (first acceptable value per parameter) for the simple, multiple
and parallel Python categories, validated against the functions offered with each question. A
good validator accepts them (false-reject rate) and rejects each corruption of them: a required
argument dropped, an argument's type changed, an undeclared argument added, the function renamed,
the arguments made invalid JSON (detection rate per corruption). The AST check is run the same way:
ground truths match themselves, corrupted calls do not.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

from evals.report import EvalReport
from evals.shared import shared_root as shared_data
from synth.tools.ast_check import calls_match, first_choice
from synth.tools.schema import arguments_schema
from synth.tools.validate import validate_call

NAME = "toolcall"
HELP = "tool-call validator and BFCL AST check: false rejects on real calls, detection of corrupted calls"
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bfcl", default=str(shared_data() / "function_calling" / "bfcl_v4"))
    parser.add_argument("--limit", type=int, default=0, help="first N questions per category (0 = all)")


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]


def load_bfcl(folder: Path, category: str, limit: int = 0) -> list[tuple[list[dict], list[dict]]]:
    """(functions, ground-truth calls) per question."""
    qs = _jsonl(folder / f"BFCL_v4_{category}.json")
    answers = {a["id"]: a["ground_truth"] for a in _jsonl(folder / "possible_answer" / f"BFCL_v4_{category}.json")}
    out = [(q["function"], answers[q["id"]]) for q in qs if q["id"] in answers]
    return out[:limit] if limit else out


def _wrong_type(value):
    if isinstance(value, str):
        return 12345
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, (int, float)):
        return str(value)
    return "not-a-" + type(value).__name__


def corruptions(call: dict, tool: dict) -> dict[str, dict]:
    """Named corrupted copies of a valid call (only those that apply to this tool)."""
    schema = arguments_schema(tool)
    args = call["arguments"]
    out = {}
    required = [p for p in schema.get("required", []) if p in args]
    if required:
        c = copy.deepcopy(call)
        del c["arguments"][required[0]]
        out["missing_required"] = c
    typed = [p for p, s in schema.get("properties", {}).items() if p in args and "type" in s and "enum" not in s]
    if typed:
        c = copy.deepcopy(call)
        c["arguments"][typed[0]] = _wrong_type(args[typed[0]])
        out["wrong_type"] = c
    c = copy.deepcopy(call)
    c["arguments"]["undeclared_option_xyz"] = 1
    out["unknown_argument"] = c
    out["unknown_tool"] = {**copy.deepcopy(call), "name": call["name"] + "_v2"}
    out["arguments_not_json"] = {"name": call["name"], "arguments": json.dumps(args)[:-1]}
    return out


def run(args) -> EvalReport:
    folder = Path(args.bfcl)
    if not folder.is_dir():
        raise SystemExit(f"BFCL v4 folder not found at {folder} (set --bfcl or CIDERMILL_SHARED_DATA)")
    n_calls = rejected_truth = ast_truth_ok = 0
    caught: dict[str, list[int]] = {}
    ast_caught: dict[str, list[int]] = {}
    examples = []
    for category in CATEGORIES:
        for functions, truths in load_bfcl(folder, category, args.limit):
            calls = [first_choice(t) for t in truths]
            ast_truth_ok += calls_match(calls, truths)
            for call in calls:
                n_calls += 1
                reason = validate_call(call, functions)
                if reason:
                    rejected_truth += 1
                    if len(examples) < 5:
                        examples.append(f"{category}: {call['name']} rejected as {reason}")
                tool = next(f for f in functions if f["name"] == call["name"])
                for kind, bad in corruptions(call, tool).items():
                    got = validate_call(bad, functions)
                    caught.setdefault(kind, [0, 0])
                    caught[kind][0] += got == kind
                    caught[kind][1] += 1
                    if kind != "arguments_not_json":
                        ast_caught.setdefault(kind, [0, 0])
                        ast_caught[kind][0] += not calls_match([bad], [truths[calls.index(call)]])
                        ast_caught[kind][1] += 1
    n_questions = sum(len(load_bfcl(folder, c, args.limit)) for c in CATEGORIES)
    rows = [{"check": "validator accepts real BFCL ground-truth calls", "n": n_calls,
             "rate": 1 - rejected_truth / max(n_calls, 1)}]
    rows += [{"check": f"validator rejects `{k}` with that reason", "n": v[1], "rate": v[0] / v[1]}
             for k, v in sorted(caught.items())]
    rows += [{"check": "AST: ground truth matches itself", "n": n_questions, "rate": ast_truth_ok / max(n_questions, 1)}]
    rows += [{"check": f"AST: `{k}` call does not match", "n": v[1], "rate": v[0] / v[1]}
             for k, v in sorted(ast_caught.items())]
    report = EvalReport(name=NAME, tables={"tool-call checks on BFCL v4": rows}, notes=examples)
    report.targets["validator false rejects <= 2%"] = rejected_truth / max(n_calls, 1) <= 0.02
    report.targets["every corruption detected with its reason >= 99%"] = all(v[0] / v[1] >= 0.99 for v in caught.values())
    return report
