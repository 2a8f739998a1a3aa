"""Task logic with real data and a scripted LM (the LM is a stand-in only for the model's outputs); backend
equalities on the tiny checkpoint; result manifests and compare."""

from __future__ import annotations

import json

import pytest

from evals.model.backends import HFLM, LM, MegatronLM
from evals.model.generation import gsm8k_extract, run_gsm8k
from evals.model.longcontext import make_item, run_longcontext
from evals.model.posttrain import bfcl_items, grade, pass_at_k, run_bfcl, run_summaries
from evals.model.runner import compare, evaluate, read_results, write_results
from synth.checkers import bfcl_correct, judge_code, parse_calls


class Scripted(LM):
    name = "scripted"

    def __init__(self, answer):
        self.answer = answer

    def loglikelihood(self, requests):
        return [(-float(len(c)), False) for _, c in requests]

    def generate(self, prompts, *, max_new_tokens=256, stop=(), temperature=0.0, seed=0):
        self.seeds = getattr(self, "seeds", []) + [seed]
        return [self.answer(p, seed) if self.answer.__code__.co_argcount == 2 else self.answer(p) for p in prompts]


def _render(call: dict) -> str:
    return f"{call['name']}(" + ", ".join(f"{k}={v!r}" for k, v in call["arguments"].items()) + ")"


def test_bfcl_ground_truths_pass_and_rules(shared_data):
    from synth.tools.ast_check import first_choice

    items = bfcl_items(shared_data / "benchmarks", 25)
    by_prompt = {}
    from evals.model.posttrain import bfcl_prompt

    for _, q, truth in items:  # the model answers each question with its ground truth, in reversed order
        by_prompt[bfcl_prompt(q)] = "[" + ", ".join(_render(first_choice(t)) for t in reversed(truth)) + "]"
    res = run_bfcl(Scripted(lambda p: by_prompt[p]), shared_data / "benchmarks", 25)
    assert res["metrics"]["n"] == 100 and res["metrics"]["parse_rate"] == 1.0
    assert res["metrics"]["ast_overall"] == 1.0  # parallel calls match in any order
    funcs = [{"name": "area", "parameters": {"properties": {"r": {"type": "float"}, "n": {"type": "integer"},
                                                             "unit": {"type": "string"}}}}]
    truth = [{"area": {"r": [2.0], "n": [3], "unit": ["cm", ""]}}]
    assert bfcl_correct(parse_calls("[area(r=2, n=3)]"), truth, funcs)  # int -> float; optional omitted
    assert not bfcl_correct(parse_calls("[area(r=2.0, n=3.0)]"), truth, funcs)  # float for an integer
    assert not bfcl_correct(parse_calls("[area(r=2.0)]"), truth, funcs)  # required n missing
    assert not bfcl_correct(parse_calls("[area(r=2.0, n=3, color='red')]"), truth, funcs)
    assert parse_calls("__import__('os').system('x')") is None or \
        not bfcl_correct(parse_calls("__import__('os').system('x')"), truth, funcs)


def test_gsm8k_extraction_and_scoring(shared_data):
    assert gsm8k_extract("She sells 9 eggs, so 9 * 2 = 18. The answer is 18.") == "18"
    assert gsm8k_extract("costs $1,250 in total") == "1250"
    gold = {}
    for row in (json.loads(line) for line in open(shared_data / "benchmarks" / "gsm8k" / "test.jsonl")):
        gold[row["question"]] = row["answer"].split("####")[-1].strip()
    right = run_gsm8k(Scripted(lambda p: f" ... The answer is {gold[p.rsplit('Question: ', 1)[1][:-8]]}."),
                      shared_data / "benchmarks", 5)
    assert right["metrics"]["exact_match"] == 1.0 and len(right["fewshot"]["indices"]) == 8
    wrong = run_gsm8k(Scripted(lambda p: " The answer is -1."), shared_data / "benchmarks", 5)
    assert wrong["metrics"]["exact_match"] == 0.0


def test_code_pass_at_k_in_sandbox(shared_data):
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3) and pass_at_k(5, 5, 2) == 1.0
    assert judge_code("def add(a, b):\n    return a + b", "assert add(2, 3) == 5").passed
    assert not judge_code("def add(a, b):\n    return a - b", "assert add(2, 3) == 5").passed


def test_humaneval_sampled_pass_at_k(shared_data):
    import gzip

    from evals.model.posttrain import run_humaneval

    with gzip.open(shared_data / "benchmarks" / "humaneval" / "HumanEval.jsonl.gz", "rt") as f:
        solutions = {json.loads(line)["prompt"]: json.loads(line)["canonical_solution"] for line in f}
    # seed 0 answers with the canonical solution, seed 1 with a wrong body: pass@1 = 1/2, pass@2 = 1
    lm = Scripted(lambda p, seed: solutions[p] if seed == 0 else "    return None\n")
    res = run_humaneval(lm, shared_data / "benchmarks", 3, samples=2)
    assert res["metrics"]["pass@1"] == pytest.approx(0.5) and res["metrics"]["pass@2"] == 1.0
    assert lm.seeds == [0, 1] and [r["passed"] for r in res["samples"]] == [[True, False]] * 3
    greedy = run_humaneval(Scripted(lambda p: solutions[p]), shared_data / "benchmarks", 3)
    assert greedy["metrics"]["pass@1"] == 1.0


def test_mbpp_entry_points_come_from_the_reference(shared_data, tmp_path):
    # MBPP/126 names its function `sum`: the task's reference says so, so the tests' `sum` is the completion's
    # (inferred, it would be the builtin); a completion still cannot rebind another name the tests use.
    from evals.model.posttrain import run_mbpp

    [row] = [json.loads(line) for line in open(shared_data / "benchmarks" / "mbpp" / "mbpp.jsonl")
             if json.loads(line)["task_id"] == 126]
    (tmp_path / "mbpp").mkdir()
    (tmp_path / "mbpp" / "mbpp.jsonl").write_text(json.dumps(row) + "\n")
    body = row["code"].split(":", 1)[1]   # the reference's body, after the prompt's `def sum(a,b):`
    res = run_mbpp(Scripted(lambda p: body), tmp_path, None)
    assert res["metrics"]["pass@1"] == 1.0
    patch = "\n    return 0\nimport builtins\nbuiltins.sum = lambda *a: 6\n"
    cheat = run_mbpp(Scripted(lambda p: patch), tmp_path, None)
    assert cheat["metrics"]["pass@1"] == 0.0


def test_summaries_graded_by_scripted_judge():
    from synth.backends.scripted import ScriptedBackend

    assert grade("Good.") == "Good" and grade("poor summary") == "Poor" and grade("maybe") is None
    docs = ["The council approved a new park on Main Street. Work starts in May.", "Rain is expected all week."]
    judge = ScriptedBackend(lambda req, i: "Good" if "park" in req.messages[-1]["content"] else "Poor")
    res = run_summaries(Scripted(lambda p: "A summary."), None, None, judge=judge, documents=docs)
    assert res["metrics"]["good_rate"] == 0.5 and [r["grade"] for r in res["samples"]] == ["Good", "Poor"]


def test_long_context_items_are_deterministic_and_scored():
    a, b = make_item("ruler_vartrack", 1024, 0.5, 1), make_item("ruler_vartrack", 1024, 0.5, 1)
    assert a == b and all(v in a["prompt"] for v in a["expected"])
    item = make_item("niah", 2048, 0.9, 1)
    assert item["prompt"].index(item["expected"][0]) > 0.8 * 2048
    oracle = run_longcontext("ruler_multivalue", Scripted(lambda p: " ".join(
        w.rstrip(".") for w in p.split() if w.rstrip(".").isdigit() and len(w.rstrip(".")) == 7)), None, None)
    assert oracle["metrics"]["score"] == 1.0 and oracle["metrics"]["n"] == 9


@pytest.mark.slow
def test_megatron_kv_cache_generation_equals_transformers(tiny_checkpoint, tiny_export, c4_docs):
    ours, theirs = MegatronLM(tiny_checkpoint), HFLM(tiny_export)
    prompts = [d["text"][: 20 + 13 * i] for i, d in enumerate(c4_docs[:5])]  # different lengths in one batch
    assert ours.generate(prompts, max_new_tokens=16) == theirs.generate(prompts, max_new_tokens=16)
    sampled = [ours.generate(prompts, max_new_tokens=16, temperature=1.0, seed=s) for s in (3, 3, 4)]
    assert sampled[0] == sampled[1] and sampled[0] != sampled[2]  # seeded sampling
    reqs = [(d["text"][:100], " " + d["text"][100:140]) for d in c4_docs[:6]]
    for (a, ga), (b, gb) in zip(ours.loglikelihood(reqs), theirs.loglikelihood(reqs)):
        assert abs(a - b) < 1e-3 and ga == gb


def test_results_manifest_and_compare(shared_data, tmp_path):
    lm = Scripted(lambda p: "")
    r1 = evaluate(lm, ["arc_easy", "piqa"], limit=10, data_dir=str(shared_data / "benchmarks"), log=lambda *_: None)
    path = write_results(r1, tmp_path / "a")
    back = read_results(tmp_path / "a")
    assert back["tasks"]["arc_easy"]["version"] == "v1" and back["limit"] == 10
    assert (tmp_path / "a" / back["tasks"]["piqa"]["samples_file"]).read_text().count("\n") == 10
    r2 = json.loads(path.read_text())
    r2["tasks"]["arc_easy"]["metrics"]["acc"] += 0.25
    rows = {(r["task"], r["metric"]): r for r in compare(back, r2)}
    assert rows[("arc_easy", "acc")]["delta"] == pytest.approx(0.25)
    assert rows[("piqa", "acc")]["delta"] == 0.0


def test_missing_data_names_what_to_set(tmp_path, monkeypatch):
    from evals.model.data import DataMissing
    from evals.model.loglik import items_for

    with pytest.raises(DataMissing, match="CIDERMILL_BENCHMARKS"):
        items_for("arc_easy", tmp_path, 5)


@pytest.mark.slow
def test_sdpa_core_attention_equals_megatron_attention(tiny_checkpoint, c4_docs):
    import torch

    fast, stock = MegatronLM(tiny_checkpoint), MegatronLM(tiny_checkpoint, sdpa=False)
    assert fast.sdpa and not stock.sdpa
    tokens = torch.tensor([fast.encode(d["text"][:150]) for d in c4_docs[:3] if len(d["text"].encode()) >= 150
                           and len(fast.encode(d["text"][:150])) == 150])
    with torch.no_grad():
        assert float((fast.logits(tokens) - stock.logits(tokens)).abs().max()) < 1e-4
    prompts = ["The city council", "Researchers at the university found that"]
    assert fast.generate(prompts, max_new_tokens=10) == stock.generate(prompts, max_new_tokens=10)


def test_every_registered_gauntlet_file_loads(shared_data):
    from evals.model.loglik import GAUNTLET_LOGLIK, items_for

    for rel in GAUNTLET_LOGLIK:
        items = items_for("gauntlet/" + rel[: -len(".jsonl")], shared_data / "benchmarks", 3)
        assert len(items) == 3 and all(it.requests for it in items)
        assert all(it.gold < len(it.requests) for it in items)
    from evals.model.generation import normalize_answer

    assert normalize_answer("The  Onion!") == "onion"


@pytest.mark.slow
def test_cli_model_compare_plot(tiny_checkpoint, shared_data, tmp_path, capsys):
    from manifests.main import main

    data = str(shared_data / "benchmarks")
    for name, tasks in (("a", "arc_easy"), ("b", "arc_easy,piqa")):
        assert main(["eval", "model", str(tiny_checkpoint), "--tasks", tasks, "--limit", "6", "--json",
                     "--data-dir", data, "--out", str(tmp_path / name)]) == 0
        printed = json.loads(capsys.readouterr().out)
    assert printed["model"]["backend"] == "megatron" and printed["model"]["stage"] == "core"
    assert printed["tasks"]["piqa"]["metrics"]["n"] == 6 and printed["model"]["core_attention"] == "sdpa"
    assert main(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    table = capsys.readouterr().out
    assert "arc_easy" in table and "+0.0000" in table and "piqa" in table
    assert main(["eval", "plot", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "s.png")]) == 0
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_openai_backend_goes_through_synth_backend(shared_data):
    from manifests.errors import ConfigError
    from synth.backends.scripted import ScriptedBackend

    from evals.model.backends import OpenAIServerLM
    from evals.model.ifeval import run_ifeval

    seen = []
    backend = ScriptedBackend(lambda req, i: seen.append(req.params.temperature) or "my answer is yes. THE END")
    lm = OpenAIServerLM(base_url="unused", model="m", backend=backend)
    res = run_ifeval(lm, shared_data / "benchmarks", 3)
    assert res["metrics"]["n"] == 3 and seen == [0.0, 0.0, 0.0]
    with pytest.raises(ConfigError, match="log-likelihood"):
        lm.loglikelihood([("a", " b")])
