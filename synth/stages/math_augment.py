"""New math questions from seeds: rephrase (LLM), reversion (rule), evolution in depth / breadth (LLM).

Every generated question is checked before it is kept, because a small model garbles numbers:
- rephrase: every number of the original survives (as a multiset), the text changed, length is sane;
  the ground-truth answer carries over.
- reversion (rule-made, no model): one number that occurs once is replaced by `x`, the original
  answer is stated, and the question asks for `x`; the ground truth is the hidden number.
- evolution: a question is present (ends with '?'), it is not a near copy of the seed, length is
  sane; it has no ground truth (answers are kept by majority vote later).
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa

from manifests.config import require
from corpus.registry import register
from synth.generation.generator import Generator, schema_with_provenance
from synth.generation.llm import LLMConfig, get_backend, rule_provenance

from synth.math.answers import numbers_in
from synth.math.prompts import EVOLVE_BREADTH, EVOLVE_DEPTH, REPHRASE

KINDS = ("seed", "rephrase", "reverse", "evolve_depth", "evolve_breadth")

QUESTION_SCHEMA = schema_with_provenance(
    pa.field("question", pa.string()), pa.field("answer", pa.string()),  # answer null = no ground truth
    pa.field("kind", pa.string()), pa.field("parent_id", pa.string()),
)


def _new_id(parent: str, kind: str, text: str) -> str:
    return hashlib.sha256(f"{parent}\x00{kind}\x00{text}".encode()).hexdigest()[:16]


_QUOTED_QUESTION = re.compile(r"[\"“]([^\"“”]{30,}\?)\s*[\"”]")


def clean_generation(text: str) -> str:
    """Drop a leading label the model likes to echo ('Rewritten problem:', 'New problem:'); when the
    reply wraps the problem in quotes among chatter, keep the quoted problem."""
    quoted = _QUOTED_QUESTION.findall(text)
    if quoted:
        return quoted[0].strip()
    text = text.strip().strip('"').strip()
    text = re.sub(r"^(?:\*\*)?(?:rewritten|new|harder)?\s*(?:problem|question)\s*(?:\d+)?\s*:\s*(?:\*\*)?\s*", "",
                  text, flags=re.I)
    return text.strip()


_LABEL_ECHO = re.compile(r"\b(?:rewritten|redacted|new|harder|original|revised)\s+(?:problem|version|question)\s*:", re.I)


def check_rephrase(original: str, new: str) -> str | None:
    return rephrase_check(original, new)[0]


def rephrase_check(original: str, new: str) -> tuple[str | None, dict | None]:
    """(reason, evidence): the measured value and its limit, the echoed label, or the lost numbers."""
    if not new:
        return "empty_generation", {"chars": 0}
    if new.strip() == original.strip():
        return "unchanged", {"chars": len(new)}
    m = _LABEL_ECHO.search(new)
    if m:
        return "label_echo", {"match": m.group(0), "span": [m.start(), m.end()]}  # it rambled into another section
    if original.rstrip().endswith("?") and "?" not in new[-80:]:
        return "no_question", {"tail": new[-80:]}
    ratio = len(new) / max(len(original), 1)
    if not 0.5 <= ratio <= 2.0:
        return "length_ratio", {"value": ratio, "min": 0.5, "max": 2.0}
    missing = Counter(numbers_in(original)) - Counter(numbers_in(new))
    if missing:
        return "numbers_changed", {"missing": sorted(missing.elements())[:10]}
    return None, None


def check_evolved(seed: str, new: str) -> str | None:
    return evolved_check(seed, new)[0]


def evolved_check(seed: str, new: str) -> tuple[str | None, dict | None]:
    """(reason, evidence) as `rephrase_check`, for a harder or broader question."""
    if not new:
        return "empty_generation", {"chars": 0}
    m = _LABEL_ECHO.search(new)
    if m:
        return "label_echo", {"match": m.group(0), "span": [m.start(), m.end()]}
    if "?" not in new[-80:]:
        return "no_question", {"tail": new[-80:]}
    similarity = difflib.SequenceMatcher(None, seed, new).ratio()
    if similarity >= 0.9:
        return "near_copy", {"similarity": similarity, "max": 0.9}
    top = 4 * max(len(seed), 200)
    if not 40 <= len(new) <= top:
        return "length_out_of_range", {"chars": len(new), "min": 40, "max": top}
    if not numbers_in(new) and not re.search(r"\b(one|two|three|four|five|six|seven|eight|nine|ten|half)\b", new, re.I):
        return "no_quantities", {"numbers": 0}
    return None, None


def reverse_question(question: str, answer: str) -> tuple[str, str] | None:
    """(backward question, hidden number), or None when no number occurs exactly once."""
    nums = numbers_in(question)
    counts = Counter(nums)
    candidates = [n for n in nums if counts[n] == 1 and n != answer]
    if not candidates or not answer:
        return None
    hidden = max(candidates, key=lambda n: (len(n), n))  # prefer a distinctive quantity
    pattern = re.compile(r"(?<![\w.])" + re.escape(hidden) + r"(?![\w]|\.\d)")
    with_commas = re.compile(r"(?<![\w.])" + re.escape(f"{int(hidden):,}") + r"(?![\w]|\.\d)") if hidden.isdigit() else None
    body, n_sub = pattern.subn("x", question, count=1)
    if n_sub == 0 and with_commas is not None:
        body, n_sub = with_commas.subn("x", question, count=1)
    if n_sub != 1:
        return None
    sentences = re.split(r"(?<=[.!])\s+", body.strip())
    last = sentences[-1] if sentences else body
    # The original question is kept as a clause: "If we know the answer to <it> is A, what is x?"
    text = (" ".join(sentences[:-1]) + (" " if len(sentences) > 1 else "")
            + f"{last.rstrip('?').rstrip()}? If we know the answer to the question above is {answer}, "
            + "what is the value of the unknown variable x?")
    return text.strip(), hidden


@dataclass(frozen=True, kw_only=True)
class AugmentConfig(LLMConfig):
    kinds: list[str] = field(default_factory=lambda: ["seed", "rephrase", "reverse", "evolve_depth", "evolve_breadth"])
    max_tokens: int = 160
    temperature: float = 0.7

    def __post_init__(self):
        super().__post_init__()
        bad = sorted(set(self.kinds) - set(KINDS))
        require(not bad, f"unknown kinds {bad}; choose from {list(KINDS)}")


@register
class MathAugment(Generator):
    """Seeds (id, question, answer) -> questions of every asked kind, each checked."""

    name = "math_augment_v1"
    Config = AugmentConfig
    schema = QUESTION_SCHEMA

    def expand(self, table: pa.Table) -> tuple[list[dict], list[tuple[int, str]]]:
        c = self.config
        seeds = table.select(["id", "source", "question", "answer"]).to_pylist()
        rows, dropped = [], []
        if "seed" in c.kinds:
            for s in seeds:
                rows.append({**s, "kind": "seed", "parent_id": None, **rule_provenance("math_seed")})
        if "reverse" in c.kinds:
            for i, s in enumerate(seeds):
                rev = reverse_question(s["question"], s["answer"] or "")
                if rev is None:  # evidence: the numbers the question has, and the answer a number must differ from
                    dropped.append((i, "reverse_no_unique_number", {"numbers": numbers_in(s["question"])[:10],
                                                                    "answer": s["answer"]}))
                    continue
                q, hidden = rev
                rows.append({"id": _new_id(s["id"], "reverse", q), "source": s["source"], "question": q,
                             "answer": hidden, "kind": "reverse", "parent_id": s["id"],
                             **rule_provenance("math_reverse", seed=c.seed)})
        llm_kinds = [(k, t) for k, t in (("rephrase", REPHRASE), ("evolve_depth", EVOLVE_DEPTH),
                                         ("evolve_breadth", EVOLVE_BREADTH)) if k in c.kinds]
        if llm_kinds:
            # one backend call for every kind: same sampling, so the CPU backend batches them together
            params = c.sampling()
            requests = [(kind, i, template.request(params, question=s["question"]))
                        for kind, template in llm_kinds for i, s in enumerate(seeds)]
            responses = get_backend(c.backend).generate([req for _, _, req in requests])
            for (kind, i, _), r in zip(requests, responses):
                s = seeds[i]
                if r.error:
                    dropped.append((i, f"{kind}_llm_error", {"error": r.error}))
                    continue
                q = clean_generation(r.text)
                reason, found = (rephrase_check if kind == "rephrase" else evolved_check)(s["question"], q)
                if reason:
                    dropped.append((i, f"{kind}_{reason}", {**found, "generation": q}))
                    continue
                rows.append({"id": _new_id(s["id"], kind, q), "source": s["source"], "question": q,
                             "answer": s["answer"] if kind == "rephrase" else None, "kind": kind,
                             "parent_id": s["id"], **r.provenance()})
        return rows, dropped
