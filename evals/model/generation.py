"""Generation tasks with answer checking: GSM8K 8-shot and MATH (4-shot), greedy.

GSM8K: 8 exemplars drawn from the train split with a recorded seed (default 1234), each
"Question: ...\nAnswer: <reasoning> The answer is N.\n\n"; the model's answer is the number after
"The answer is" (else the last number in the completion), compared numerically with the gold "#### N".
MATH: 4 exemplars from the test file's first 4 problems are excluded from scoring; the answer is the last
\\boxed{...} (else the text after "The answer is"), checked with the project's answer-equivalence checker
(synth.math.answers.answers_equal: normalisation, numeric and symbolic equality).
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from .data import data_file, read_jsonl

GSM8K_SEED = 1234
_NUM = re.compile(r"-?[\d,]*\.?\d+")


def gsm8k_extract(text: str) -> str | None:
    m = re.search(r"[Tt]he answer is\s*\$?\s*(-?[\d,]*\.?\d+)", text)
    if m:
        return m.group(1).replace(",", "")
    nums = _NUM.findall(text)
    return nums[-1].replace(",", "").rstrip(".") if nums else None


def _gsm8k_shot(row: dict) -> str:
    reasoning, final = row["answer"].split("####")
    reasoning = re.sub(r"<<[^>]*>>", "", reasoning).strip().replace("\n", " ")
    return f"Question: {row['question']}\nAnswer: {reasoning} The answer is {final.strip()}.\n\n"


def run_gsm8k(lm, folder: Path, limit: int | None, *, shots: int = 8, seed: int = GSM8K_SEED,
              max_new_tokens: int = 256) -> dict:
    from synth.math.answers import answers_equal

    train = read_jsonl(data_file(folder, "gsm8k/train.jsonl"))
    test = read_jsonl(data_file(folder, "gsm8k/test.jsonl"))
    test = test[:limit] if limit else test
    exemplars = random.Random(seed).sample(range(len(train)), shots)
    prefix = "".join(_gsm8k_shot(train[i]) for i in exemplars)
    prompts = [prefix + f"Question: {r['question']}\nAnswer:" for r in test]
    outs = lm.generate(prompts, max_new_tokens=max_new_tokens, stop=("\n\nQuestion:", "\n\n"))
    rows, correct = [], 0
    for i, (r, out) in enumerate(zip(test, outs)):
        gold = r["answer"].split("####")[-1].strip().replace(",", "")
        pred = gsm8k_extract(out)
        ok = pred is not None and answers_equal(pred, gold)
        correct += ok
        rows.append({"id": f"gsm8k-{i}", "output": out, "pred": pred, "gold": gold, "correct": ok})
    return {"task": "gsm8k", "family": "generation", "version": "v1-8shot",
            "metrics": {"exact_match": correct / max(1, len(test)), "n": len(test)}, "samples": rows,
            "fewshot": {"source": "gsm8k/train.jsonl", "seed": seed, "indices": exemplars},
            "prompt": "Question: {question}\\nAnswer: {reasoning} The answer is {N}.\\n\\n x8, then the question"}


def math_extract(text: str) -> str | None:
    from synth.math.answers import last_boxed

    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    m = re.search(r"[Tt]he answer is\s*(.+?)(?:\.\s*$|\n|$)", text)
    return m.group(1).strip().strip("$") if m else None


def run_math(lm, folder: Path, limit: int | None, *, shots: int = 4, max_new_tokens: int = 384) -> dict:
    from synth.math.answers import answers_equal

    rows_all = read_jsonl(data_file(folder, "math_eval_harness/math/test.jsonl"))
    exemplars, test = rows_all[:shots], rows_all[shots:]
    test = test[:limit] if limit else test
    prefix = "".join(f"Problem: {r['problem']}\nSolution: {r['solution']}\n\n" for r in exemplars)
    outs = lm.generate([prefix + f"Problem: {r['problem']}\nSolution:" for r in test],
                       max_new_tokens=max_new_tokens, stop=("\n\nProblem:",))
    rows, correct = [], 0
    for i, (r, out) in enumerate(zip(test, outs)):
        gold, pred = math_extract(r["solution"]), math_extract(out)
        ok = pred is not None and answers_equal(pred, gold)
        correct += ok
        rows.append({"id": f"math-{r.get('idx', i)}", "output": out, "pred": pred, "gold": gold, "correct": ok})
    return {"task": "math", "family": "generation", "version": "v1-4shot",
            "metrics": {"exact_match": correct / max(1, len(test)), "n": len(test)}, "samples": rows,
            "fewshot": {"source": "math_eval_harness/math/test.jsonl", "indices": list(range(shots)),
                        "note": "exemplars excluded from scoring"},
            "prompt": "Problem: {problem}\\nSolution: {solution}\\n\\n x4, then the problem"}


def normalize_answer(text: str) -> str:
    """SQuAD-style: lower case, no punctuation, no articles (a, an, the), single spaces."""
    import string

    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def run_gauntlet_qa(lm, folder: Path, limit: int | None, *, rel: str, max_new_tokens: int = 32) -> dict:
    """Gauntlet open QA ({context, answer, aliases}; TriviaQA, Jeopardy), 0-shot: correct when the normalised
    completion starts with a normalised alias (the gauntlet's QA accuracy rule)."""
    rows = read_jsonl(data_file(folder, f"llm_foundry_gauntlet/{rel}"))
    rows = rows[:limit] if limit else rows
    outs = lm.generate([r["context"] for r in rows], max_new_tokens=max_new_tokens, stop=("\n",))
    samples, correct = [], 0
    for i, (r, out) in enumerate(zip(rows, outs)):
        labels = {normalize_answer(a) for a in [r["answer"], *r.get("aliases", [])]} - {""}
        ok = any(normalize_answer(out).startswith(a) for a in labels)
        correct += ok
        samples.append({"id": f"{Path(rel).stem}-{i}", "output": out, "answer": r["answer"], "correct": ok})
    return {"task": "gauntlet/" + rel[: -len(".jsonl")], "family": "generation", "version": "v1-0shot",
            "metrics": {"exact_match": correct / max(1, len(rows)), "n": len(rows)}, "samples": samples,
            "prompt": "{context} (ends with 'Answer:'), greedy to the first newline"}


GAUNTLET_QA = ("world_knowledge/triviaqa_sm_sub.jsonl",)

TASKS = {"gsm8k": ("generation", run_gsm8k), "math": ("generation", run_math)}
TASKS.update({"gauntlet/" + rel[: -len(".jsonl")]: (
    "generation", (lambda rel: lambda lm, f, lim, **kw: run_gauntlet_qa(lm, f, lim, rel=rel, **kw))(rel))
    for rel in GAUNTLET_QA})
