"""The independent IFEval reference for tests: lm-evaluation-harness's port of Google's instruction checks
(lm_eval.tasks.ifeval), run offline. Its sentence counting and word tokenizing load nltk's punkt data, which
cannot be downloaded here; they are given nltk's own Punkt algorithm with default (untrained) parameters and
nltk's Treebank word tokenizer instead, so the reference stays nltk's code, not ours. langdetect is seeded."""

from __future__ import annotations


def reference_follows(prompts: list[dict], responses: list[str]) -> list[dict]:
    import langdetect
    import nltk
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    langdetect.DetectorFactory.seed = 0
    from lm_eval.tasks.ifeval import instructions_util, utils

    punkt = PunktSentenceTokenizer()
    instructions_util._get_sentence_tokenizer = lambda: punkt
    treebank = nltk.tokenize.NLTKWordTokenizer()
    instructions_util.nltk.word_tokenize = lambda text: [w for s in punkt.tokenize(text) for w in treebank.tokenize(s)]
    out = []
    for p, r in zip(prompts, responses):
        doc = utils.InputExample(key=p["key"], instruction_id_list=p["instruction_id_list"], prompt=p["prompt"],
                                 kwargs=p["kwargs"])
        strict = utils.test_instruction_following_strict(doc, r)
        loose = utils.test_instruction_following_loose(doc, r)
        out.append({"strict": list(strict.follow_instruction_list), "loose": list(loose.follow_instruction_list)})
    return out
