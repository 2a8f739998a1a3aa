"""Tool-use generation: the schema validator, examples from real glaive dialogues, bootstrap
checks, parallel merges, distractors."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from synth.stages.tools_augment import ParallelCalls
from synth.stages.tools_bootstrap import BootstrapExamples
from synth.stages.tools_examples import ToolExamples, examples_from_dialogue
from synth.stages.tools_filters import ToolCallValidate
from synth.tools.schema import arguments_schema
from synth.tools.seeds import load_glaive
from synth.tools.validate import parse_call_text, validate_call

TIP = {"name": "calculate_tip", "description": "Calculate the tip amount",
       "parameters": {"type": "object", "properties": {
           "bill_amount": {"type": "number", "description": "The total bill"},
           "tip_percentage": {"type": "number", "description": "Tip in percent"},
           "currency": {"type": "string", "enum": ["USD", "EUR"]}},
           "required": ["bill_amount", "tip_percentage"]}}


@pytest.mark.parametrize("call,reason", [
    ({"name": "calculate_tip", "arguments": {"bill_amount": 50, "tip_percentage": 15}}, None),
    ({"name": "calculate_tip", "arguments": '{"bill_amount": 50, "tip_percentage": 15.5}'}, None),
    ({"name": "calculate_tip", "arguments": {"bill_amount": "fifty", "tip_percentage": 15}}, "wrong_type"),
    ({"name": "calculate_tip", "arguments": {"bill_amount": 50, "tip_percentage": True}}, "wrong_type"),
    ({"name": "calculate_tip", "arguments": {"bill_amount": 50}}, "missing_required"),
    ({"name": "calculate_tip", "arguments": {"bill_amount": 50, "tip_percentage": 15, "tax": 3}}, "unknown_argument"),
    ({"name": "calculate_tip", "arguments": {"bill_amount": 50, "tip_percentage": 15, "currency": "GBP"}},
     "invalid_value"),
    ({"name": "calculate_tax", "arguments": {}}, "unknown_tool"),
    ({"name": "calculate_tip", "arguments": "{bill_amount: 50"}, "arguments_not_json"),
    ({"name": "calculate_tip"}, "malformed_call"),
    ({"arguments": {}}, "malformed_call"),
    (["calculate_tip"], "malformed_call"),
    ({"name": "calculate_tip", "arguments": [50, 15]}, "malformed_call"),
])
def test_validator_rejects_malformed_calls_and_wrong_types(call, reason):
    assert validate_call(call, [TIP]) == reason


def test_bfcl_dialect_maps_to_json_schema():
    tool = {"name": "f", "parameters": {"type": "dict", "properties": {
        "x": {"type": "float"}, "pts": {"type": "tuple", "items": {"type": "integer"}}, "v": {"type": "any"}},
        "required": ["x"]}}
    assert arguments_schema(tool)["type"] == "object"
    assert validate_call({"name": "f", "arguments": {"x": 1.5, "pts": [1, 2], "v": {"a": 1}}}, [tool]) is None
    assert validate_call({"name": "f", "arguments": {"x": "1.5"}}, [tool]) == "wrong_type"
    assert validate_call({"name": "f", "arguments": {"x": 1.0, "pts": [1.5]}}, [tool]) == "wrong_type"


def test_real_glaive_dialogues_give_examples_and_negatives(shared_data):
    table = load_glaive(shared_data / "function_calling/llamafactory_glaive/glaive_toolcall_en_demo.json")
    out = ToolExamples({})(table)
    kinds = out.table.column("kind").to_pylist()
    assert (kinds.count("single"), kinds.count("negative")) == (210, 38)
    # one real glaive call passes a wrong argument type: it is dropped as a seed, with the reason
    assert out.stats.dropped["seed_wrong_type"] == 1
    assert ToolCallValidate({})(out.table).stats.dropped == {}  # everything extracted is valid
    first = out.table.to_pylist()[0]
    assert json.loads(first["messages"])[-1]["role"] == "user"
    assert json.loads(first["calls"]) == [{"name": "search_recipes",
                                           "arguments": {"ingredients": ["chicken", "bell peppers", "rice"]}}]
    neg = next(r for r in out.table.to_pylist() if r["kind"] == "negative")
    assert json.loads(neg["calls"]) == [] and neg["response"] and json.loads(neg["tools"])


def _single(request: str, call: dict, tools=(TIP,)) -> dict:
    conv = json.dumps([{"from": "human", "value": request}, {"from": "function_call", "value": json.dumps(call)}])
    rows, _ = examples_from_dialogue("t", json.dumps(list(tools)), conv)
    return rows[0]


def test_bootstrap_keeps_only_valid_new_requests(scripted):
    seed = _single("What tip should I leave on $50 at 15%?",
                   {"name": "calculate_tip", "arguments": {"bill_amount": 50, "tip_percentage": 15}})
    replies = iter([
        '{"request": "How much is a 20% tip on a $80 dinner?", "call": {"name": "calculate_tip", '
        '"arguments": {"bill_amount": 80, "tip_percentage": 20}}}',
        'Sure! {"request": "Tip on 30 dollars?", "call": {"name": "calculate_tip", "arguments": {"bill_amount": "30"}}}',
        "I cannot do that.",
    ])
    spec = scripted(lambda req, i: next(replies))
    table = pa.Table.from_pylist([seed, {**seed, "id": "b", "messages": seed["messages"].replace("50", "60")},
                                  {**seed, "id": "c", "messages": seed["messages"].replace("50", "70")}])
    out = BootstrapExamples({"backend": spec})(table)
    new = [r for r in out.table.to_pylist() if r["kind"] == "bootstrap"]
    assert [json.loads(r["messages"])[0]["content"] for r in new] == ["How much is a 20% tip on a $80 dinner?"]
    assert new[0]["gen_template_id"] == "tool_bootstrap"
    assert out.stats.dropped == {"bootstrap_missing_required": 1, "bootstrap_reply_not_json": 1}


def test_parallel_merges_calls_of_different_tools():
    weather = {"name": "get_weather", "description": "Weather for a city",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    a = _single("What tip should I leave on $50 at 15%?",
                {"name": "calculate_tip", "arguments": {"bill_amount": 50, "tip_percentage": 15}})
    b = _single("Hi, what's the weather in Lyon?", {"name": "get_weather", "arguments": {"city": "Lyon"}}, (weather,))
    c = _single("And the tip on $20 at 10%?", {"name": "calculate_tip", "arguments": {"bill_amount": 20, "tip_percentage": 10}})
    out = ParallelCalls({"max_pairs": 5})(pa.Table.from_pylist([a, b, c]))
    par = [r for r in out.table.to_pylist() if r["kind"] == "parallel"]
    assert len(par) == 1  # a+c share a tool: not merged
    calls = json.loads(par[0]["calls"])
    assert sorted(c["name"] for c in calls) == ["calculate_tip", "get_weather"]
    assert "Also, what's the weather in Lyon?" in json.loads(par[0]["messages"])[0]["content"] or \
        "Also, what tip" in json.loads(par[0]["messages"])[0]["content"]
    assert ToolCallValidate({})(out.table).stats.dropped == {}


def test_parse_call_text():
    assert parse_call_text('```json\n{"name": "f", "arguments": {}}\n```') == {"name": "f", "arguments": {}}
    assert parse_call_text("no json here") is None


@pytest.mark.slow
def test_distractors_are_similar_tools(shared_data):
    from synth.stages.tools_augment import AddDistractors

    table = load_glaive(shared_data / "function_calling/llamafactory_glaive/glaive_toolcall_en_demo.json", limit=120)
    ex = ToolExamples({})(table).table
    out = AddDistractors({"k": 3})(ex).table
    row = next(r for r in out.to_pylist() if json.loads(r["oracle_tools"]) == ["calculate_tip"])
    names = [t["name"] for t in json.loads(row["tools"])]
    assert "calculate_tip" in names and len(names) == 4
    # similar tools, not random ones: the distractors of a tip calculator are calculators too
    assert sum(n.startswith("calculate_") for n in names) >= 3
    assert ToolCallValidate({})(out).stats.dropped == {}


def test_generator_stages_run_under_the_local_executor(shared_data, tmp_path):
    """Generators are stages: the same rows come out of the process-pool executor as in process."""
    from corpus.executors import run_pipeline
    from corpus.pipeline import load_pipeline
    from manifests.catalog import Catalog

    table = load_glaive(shared_data / "function_calling/llamafactory_glaive/glaive_toolcall_en_demo.json", limit=80)
    Catalog(str(tmp_path)).write_table("glaive-seeds", table)
    stages = [{"tool_examples_v1": {}}, {"tool_parallel_v1": {"max_pairs": 3}}, {"tool_call_validate_v1": {}}]
    out = run_pipeline(load_pipeline({"name": "tools-sft", "input": {"format": "parquet", "version": "glaive-seeds"},
                                      # glaive repeats some dialogues, so seed ids repeat (issue 14)
                                      "output": {"root": str(tmp_path), "unique_ids": "off"},
                                      "executor": {"kind": "local", "workers": 1}, "stages": stages}), progress=False)
    expected = ParallelCalls({"max_pairs": 3})(ToolExamples({})(table).table).table
    assert sorted(out.version.read().column("id").to_pylist()) == sorted(expected.column("id").to_pylist())
    assert out.rejects is not None and set(out.rejects.read().column("drop_reason").to_pylist()) <= {
        "no_example", "seed_wrong_type"}
