"""Long-context Q&A rows.

For a gold document, a rule picks an answer span: a number or a capitalised name in a sentence of
moderate length. The LLM writes a question for that sentence whose answer is the span; a question
is kept only if it does not already contain the answer and the answer occurs in no distractor
document (so exactly one place in the context answers it). Distractors are other documents of the
pool, added in a seeded order until the context reaches the target length (words x 1.3 as a token
estimate); the gold document goes at a seeded depth, recorded with the row.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

import pyarrow as pa

from manifests.config import require
from corpus.registry import register
from synth.generation.generator import Generator, schema_with_provenance
from synth.generation.llm import LLMConfig, generate, get_backend
from synth.generation.template import PromptTemplate
from synth.stages.summaries_payloads import sentences

TOKENS_PER_WORD = 1.3

QUESTION = PromptTemplate(
    id="longctx_question", version="v1",
    system="You write reading-comprehension questions. Reply with the question only.",
    user="Sentence: {sentence}\n\nWrite one question about this sentence whose exact answer is \"{answer}\". "
         "Do not put the answer in the question. Mention enough context that the question makes sense alone.",
)

LONGCTX_SCHEMA = schema_with_provenance(
    pa.field("prompt", pa.string()), pa.field("response", pa.string()), pa.field("question", pa.string()),
    pa.field("answer", pa.string()), pa.field("evidence", pa.string()), pa.field("gold_doc_index", pa.int32()),
    pa.field("n_docs", pa.int32()), pa.field("depth", pa.float64()), pa.field("n_tokens_est", pa.int32()),
    pa.field("gold_id", pa.string()),
)

_SPAN = re.compile(r"(?<![\w$\-./:])(\d[\d,]*(?:\.\d+)?(?:\s?%| percent)?)(?![\w\-/:])|(?<![\w'])((?:[A-Z][a-z]+\s){1,2}[A-Z][a-z]+)\b")


SPAN_SENTENCE_WORDS = (8, 40)  # an answer's sentence this long is specific enough to ask about
QUESTION_WORDS = (5, 60)


def pick_span(text: str, rng: random.Random) -> tuple[str, str] | None:
    """(sentence, answer span) or None: numbers and multi-word names are short, checkable answers."""
    cands = []
    for s in sentences(text):
        if not SPAN_SENTENCE_WORDS[0] <= len(s.split()) <= SPAN_SENTENCE_WORDS[1]:
            continue
        for m in _SPAN.finditer(s):
            span = (m.group(1) or m.group(2)).strip()
            if m.start() > 0 and len(span) >= 2 and s.count(span) == 1:
                cands.append((s, span))
    return rng.choice(cands) if cands else None


def est_tokens(text: str) -> int:
    return int(len(text.split()) * TOKENS_PER_WORD)


def check_question(q: str, answer: str) -> str | None:
    if not q or "?" not in q:
        return "no_question"
    if answer.lower() in q.lower():
        return "question_contains_answer"
    if not QUESTION_WORDS[0] <= len(q.split()) <= QUESTION_WORDS[1]:
        return "question_length"
    return None


@dataclass(frozen=True, kw_only=True)
class LongContextConfig(LLMConfig):
    target_tokens: int = 8192
    max_tokens: int = 48
    max_questions: int | None = None  # gold documents asked about (the first ones); all others still serve as distractors

    def __post_init__(self):
        super().__post_init__()
        require(self.target_tokens >= 512, f"target_tokens must be >= 512; got {self.target_tokens}")
        require(self.max_questions is None or self.max_questions >= 1, "max_questions must be >= 1 or null")


def build_context(docs: list[str], gold: int, order: list[int], target: int, depth: float) -> tuple[list[str], int]:
    chosen, total = [], est_tokens(docs[gold])
    for j in order:
        if total >= target:
            break
        t = est_tokens(docs[j])
        if total + t > target * 1.05 and chosen:
            continue
        chosen.append(j)
        total += t
    at = round(depth * len(chosen))
    placed = chosen[:at] + [gold] + chosen[at:]
    return [docs[j] for j in placed], at


@register
class LongContextQA(Generator):
    """Documents (id, source, text) -> one Q&A row per usable gold document; the pool is the table."""

    name = "longctx_qa_v1"
    Config = LongContextConfig
    schema = LONGCTX_SCHEMA

    def expand(self, table: pa.Table) -> tuple[list[dict], list[tuple[int, str]]]:
        c = self.config
        recs = table.select(["id", "source", "text"]).to_pylist()
        docs = [r["text"] or "" for r in recs]
        spans, dropped = {}, []
        for i, r in enumerate(recs):
            if c.max_questions is not None and len(spans) >= c.max_questions:
                break
            got = pick_span(docs[i], random.Random(f"{c.seed}:{r['id']}"))
            if got is None:  # evidence: how much there was to pick from
                usable = sum(SPAN_SENTENCE_WORDS[0] <= len(x.split()) <= SPAN_SENTENCE_WORDS[1]
                             for x in sentences(docs[i]))
                dropped.append((i, "no_answer_span", {"chars": len(docs[i]), "usable_sentences": usable}))
            else:
                spans[i] = got
        params = c.sampling()
        idx = sorted(spans)
        responses = generate(get_backend(c.backend), QUESTION,
                             [{"sentence": spans[i][0], "answer": spans[i][1]} for i in idx], params=params)
        rows = []
        for i, resp in zip(idx, responses):
            sentence, answer = spans[i]
            q = resp.text.strip().split("\n")[0].strip().strip('"')
            reason = "llm_error" if resp.error else check_question(q, answer)
            if reason:
                dropped.append((i, reason, {"error": resp.error} if resp.error else
                                {"question": q, "answer": answer, "words": len(q.split()),
                                 "min_words": QUESTION_WORDS[0], "max_words": QUESTION_WORDS[1]}))
                continue
            rng = random.Random(f"{c.seed}:{recs[i]['id']}:ctx")
            order = [j for j in range(len(docs)) if j != i and answer.lower() not in docs[j].lower()]
            rng.shuffle(order)
            depth = rng.random()
            context, gold_at = build_context(docs, i, order, c.target_tokens, depth)
            n_tokens = sum(est_tokens(d) for d in context)
            if n_tokens < 0.5 * c.target_tokens:
                dropped.append((i, "pool_too_small_for_target", {"tokens_est": n_tokens, "min": 0.5 * c.target_tokens,
                                                                 "docs": len(context)}))
                continue
            body = "\n\n".join(f"Document [{k + 1}]\n{d.strip()}" for k, d in enumerate(context))
            prompt = f"{body}\n\nAnswer the question using the documents above.\nQuestion: {q}"
            rows.append({"id": hashlib.sha256(f"{recs[i]['id']}:{q}:{c.target_tokens}".encode()).hexdigest()[:16],
                         "source": recs[i]["source"], "prompt": prompt,
                         "response": f"{answer} (Document [{gold_at + 1}])", "question": q, "answer": answer,
                         "evidence": sentence, "gold_doc_index": gold_at, "n_docs": len(context),
                         "depth": gold_at / max(len(context) - 1, 1), "n_tokens_est": n_tokens,
                         "gold_id": recs[i]["id"], **resp.provenance()})
        return rows, dropped
