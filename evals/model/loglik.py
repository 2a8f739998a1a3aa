"""Multiple-choice and cloze tasks scored by log-likelihood.

Each task turns its data into `Choice` items: one or more (context, continuation) requests and the gold index.
Metrics: `acc` (argmax of the summed log-likelihood), `acc_norm` (argmax of log-likelihood divided by the
option's length in characters), and for cloze tasks (LAMBADA) `acc` = the continuation is the greedy
decode, plus `ppl` (exp of the mean negative log-likelihood per item). These are the usual definitions
(the ones lm-evaluation-harness reports), so the cross-check can compare them number for number.

Prompts (our own; recorded in the results manifest as `prompt`):
    ARC / PIQA / gauntlet multiple choice:  "{query}\nAnswer:" + " {choice}"   (query starts "Question: ...")
    BoolQ:        "{passage + question}\nAnswer:" + " no" / " yes"
    Winogrande:   each "{sentence up to the blank, filled with option i}" + " {rest of the sentence}"
    LAMBADA:      "{passage}" + " {last word}"
    MMLU 5-shot:  subject header, the subject's 5 dev questions with "Answer: X", then the test question;
                  choices " A" .. " D"
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from manifests.errors import RecordError

from .data import data_file, read_jsonl, read_mmlu, require_fields

GAUNTLET = "llm_foundry_gauntlet"


@dataclass(frozen=True)
class Choice:
    id: str
    requests: tuple[tuple[str, str], ...]  # one (context, continuation) per option
    gold: int  # -1 for cloze items (one request; scored by greediness)


def score_items(lm, items: list[Choice]) -> tuple[dict, list[dict]]:
    flat = [r for it in items for r in it.requests]
    results = lm.loglikelihood(flat)
    metrics = {"acc": 0.0, "acc_norm": 0.0}
    cloze_nll, cloze_tokens = 0.0, 0
    rows, k = [], 0
    for it in items:
        res = results[k: k + len(it.requests)]
        k += len(it.requests)
        if it.gold < 0:
            (lp, greedy), = res
            metrics["acc"] += greedy
            cloze_nll -= lp
            cloze_tokens += 1
            rows.append({"id": it.id, "loglik": lp, "greedy": greedy})
            continue
        lls = [lp for lp, _ in res]
        # normalised by the option's length in characters, without the space that joins it to the context
        norm = [lp / max(1, len(cont.lstrip(" "))) for lp, (_, cont) in zip(lls, it.requests)]
        pred, pred_norm = _argmax(lls), _argmax(norm)
        metrics["acc"] += pred == it.gold
        metrics["acc_norm"] += pred_norm == it.gold
        rows.append({"id": it.id, "loglik": lls, "pred": pred, "pred_norm": pred_norm, "gold": it.gold})
    n = max(1, len(items))
    metrics = {k: v / n for k, v in metrics.items()}
    if cloze_tokens:
        metrics.pop("acc_norm")
        metrics["ppl"] = math.exp(cloze_nll / cloze_tokens)
    metrics["n"] = len(items)
    return metrics, rows


def _argmax(xs: list[float]) -> int:
    return max(range(len(xs)), key=lambda i: xs[i])


def mc_items(rows: list[dict], name: str, *, answer_prefix: str = "\nAnswer:") -> list[Choice]:
    """MosaicML ICL multiple choice: {query, choices, gold}."""
    return [Choice(f"{name}-{i}", tuple((r["query"].rstrip("\n") + answer_prefix, " " + c) for c in r["choices"]),
                   int(r["gold"])) for i, r in enumerate(rows)]


def schema_items(rows: list[dict], name: str) -> list[Choice]:
    """MosaicML ICL schema (Winogrande, WSC): {context_options, continuation, gold}."""
    return [Choice(f"{name}-{i}", tuple((c, " " + r["continuation"]) for c in r["context_options"]), int(r["gold"]))
            for i, r in enumerate(rows)]


def cloze_items(rows: list[dict], name: str) -> list[Choice]:
    """MosaicML ICL language modelling (LAMBADA): {context, continuation}."""
    return [Choice(f"{name}-{i}", ((r["context"].rstrip(" "), " " + r["continuation"].strip()),), -1)
            for i, r in enumerate(rows)]


def gauntlet_items(folder: Path, rel: str, limit: int | None) -> list[Choice]:
    path = data_file(folder, f"{GAUNTLET}/{rel}")
    rows = read_jsonl(path)[:limit] if limit else read_jsonl(path)
    name = Path(rel).stem
    if rows and "context_options" in rows[0]:
        build, fields = schema_items, ("context_options", "continuation", "gold")
    elif rows and "choices" in rows[0]:
        build, fields = mc_items, ("query", "choices", "gold")
    elif rows and "continuation" in rows[0]:
        build, fields = cloze_items, ("context", "continuation")
    else:
        raise RecordError(str(path), "record 1", f"not a log-likelihood task (fields {sorted(rows[0]) if rows else []})")
    require_fields(path, rows, fields)
    for n, row in enumerate(rows, 1):  # a malformed item is one line naming it, not a TypeError later
        try:
            (item,) = build([row], name)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RecordError(str(path), f"record {n}", f"malformed item ({type(exc).__name__}: {exc})") from None
        if item.gold != -1 and not 0 <= item.gold < len(item.requests):
            raise RecordError(str(path), f"record {n}", f"gold {item.gold} is not one of its "
                                                        f"{len(item.requests)} choices")
    return build(rows, name)


def mmlu_prompt_header(subject: str) -> str:
    return f"The following are multiple choice questions (with answers) about {subject.replace('_', ' ')}.\n\n"


def mmlu_question(item: dict) -> str:
    lines = [item["question"].strip()] + [f"{l}. {c}" for l, c in zip("ABCD", item["choices"])]
    return "\n".join(lines) + "\nAnswer:"


def mmlu_items(folder: Path, limit: int | None, *, shots: int = 5) -> list[Choice]:
    """5-shot from each subject's dev questions (fixed, in file order); test items taken round-robin over
    subjects so that --limit N spans N subjects."""
    dev, test = read_mmlu(folder, "dev"), read_mmlu(folder, "test")
    order, depth = [], 0
    while True:
        layer = [(s, test[s][depth]) for s in sorted(test) if depth < len(test[s])]
        if not layer:
            break
        order += layer
        depth += 1
        if limit and len(order) >= limit:
            break
    order = order[:limit] if limit else order
    items = []
    for i, (subject, item) in enumerate(order):
        shots_text = "".join(mmlu_question(d) + f" {'ABCD'[d['answer']]}\n\n" for d in dev.get(subject, [])[:shots])
        context = mmlu_prompt_header(subject) + shots_text + mmlu_question(item)
        items.append(Choice(f"mmlu-{subject}-{i}", tuple((context, f" {l}") for l in "ABCD"), item["answer"]))
    return items


# name -> (version, gauntlet file or loader)
LOGLIK_TASKS = {
    "arc_easy": ("v1", "world_knowledge/arc_easy.jsonl"),
    "arc_challenge": ("v1", "world_knowledge/arc_challenge.jsonl"),
    "piqa": ("v1", "commonsense_reasoning/piqa.jsonl"),
    "boolq": ("v1", "reading_comprehension/boolq.jsonl"),
    "winogrande": ("v1", "language_understanding/winogrande.jsonl"),
    "lambada": ("v1", "language_understanding/lambada_openai.jsonl"),
    "mmlu": ("v1-5shot", None),
}

# the gauntlet's other log-likelihood files (multiple choice, schema, and language-modelling ones scored as
# cloze: the continuation must be the greedy decode), 0-shot here; `gauntlet` runs all of them
GAUNTLET_LOGLIK = (
    "commonsense_reasoning/bigbench_novel_concepts.jsonl", "commonsense_reasoning/bigbench_strange_stories.jsonl",
    "commonsense_reasoning/bigbench_strategy_qa.jsonl", "commonsense_reasoning/commonsense_qa.jsonl",
    "commonsense_reasoning/copa.jsonl", "commonsense_reasoning/openbook_qa.jsonl", "commonsense_reasoning/siqa.jsonl",
    "language_understanding/bigbench_conceptual_combinations.jsonl",
    "language_understanding/bigbench_conlang_translation.jsonl",
    "language_understanding/bigbench_language_identification.jsonl", "language_understanding/winograd_wsc.jsonl",
    "reading_comprehension/agi_eval_lsat_lr.jsonl", "reading_comprehension/agi_eval_lsat_rc.jsonl",
    "reading_comprehension/agi_eval_sat_en.jsonl", "reading_comprehension/bigbench_understanding_fables.jsonl",
    "reading_comprehension/pubmed_qa_labeled.jsonl", "safety/enterprise_pii_classification.jsonl",
    "safety/winogender_mc_female.jsonl", "safety/winogender_mc_male.jsonl",
    "symbolic_problem_solving/agi_eval_lsat_ar.jsonl", "symbolic_problem_solving/bigbench_cs_algorithms.jsonl",
    "symbolic_problem_solving/bigbench_dyck_languages.jsonl", "symbolic_problem_solving/bigbench_logical_deduction.jsonl",
    "symbolic_problem_solving/bigbench_operators.jsonl", "symbolic_problem_solving/bigbench_repeat_copy_logic.jsonl",
    "symbolic_problem_solving/logi_qa.jsonl", "symbolic_problem_solving/math_qa.jsonl",
    "world_knowledge/bigbench_misconceptions.jsonl", "world_knowledge/bigbench_movie_recommendation.jsonl",
    "world_knowledge/bigbench_qa_wikidata.jsonl", "world_knowledge/jeopardy_all.jsonl",
)
# not here: the gauntlet's chain-of-thought files (gsm8k, math, svamp, aqua, agi_eval_sat_math: GSM8K and MATH
# are generation tasks of their own), open QA (triviaqa: generation.py) and code (human_eval*: posttrain.py)


def items_for(name: str, folder: Path, limit: int | None) -> list[Choice]:
    if name == "mmlu":
        return mmlu_items(folder, limit)
    if name.startswith("gauntlet/"):
        return gauntlet_items(folder, name[len("gauntlet/"):] + ".jsonl", limit)
    return gauntlet_items(folder, LOGLIK_TASKS[name][1], limit)


def run_loglik(lm, name: str, folder: Path, limit: int | None) -> dict:
    items = items_for(name, folder, limit)
    metrics, rows = score_items(lm, items)
    version = LOGLIK_TASKS.get(name, ("v1",))[0]
    return {"task": name, "family": "loglik", "version": version, "metrics": metrics, "samples": rows,
            "prompt": __doc__.split("Prompts")[1].strip()[:600] if name in LOGLIK_TASKS else "{query}\\nAnswer: {choice}",
            "example": {"context": items[0].requests[0][0][-300:], "continuations": [c for _, c in items[0].requests]}
            if items else None}
