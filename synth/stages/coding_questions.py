"""Question stages: generate interview questions from seed topics, drop duplicates, drop
questions that overlap HumanEval/MBPP.

    coding_questions_v1        topics (id, source, topic, signature, entry_point) -> questions
    coding_question_dedup_v1   exact (normalised) and near-duplicate (word 3-gram Jaccard) questions
    coding_decontam_v1         questions sharing an n-gram with a HumanEval/MBPP item (corpus.decontam index)
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from dataclasses import field as dc_field

import pyarrow as pa

from manifests.config import require
from corpus.decontam.benchmarks import benchmarks_dir, check_available, load_items
from corpus.decontam.index import NgramIndex
from corpus.dedup.ngrams import tokenize
from corpus.registry import register
from corpus.stage import Filter
from synth.generation.generator import Generator, schema_with_provenance
from synth.generation.llm import LLMConfig, generate, get_backend

from synth.coding.prompts import QUESTION, QUESTION_CHARS, clean_question, cut_question

QUESTION_SCHEMA = schema_with_provenance(
    pa.field("topic", pa.string()), pa.field("signature", pa.string()), pa.field("entry_point", pa.string()),
    pa.field("question", pa.string()),
)


@dataclass(frozen=True, kw_only=True)
class QuestionsConfig(LLMConfig):
    questions_per_topic: int = 2
    max_tokens: int = 160
    temperature: float = 0.8

    def __post_init__(self):
        super().__post_init__()
        require(self.questions_per_topic >= 1, f"questions_per_topic must be >= 1; got {self.questions_per_topic}")


@register
class CodingQuestions(Generator):
    """One request per topic, `questions_per_topic` sampled completions each."""

    name = "coding_questions_v1"
    Config = QuestionsConfig
    schema = QUESTION_SCHEMA

    def expand(self, table: pa.Table) -> tuple[list[dict], list[tuple[int, str]]]:
        c = self.config
        seeds = table.select(["id", "source", "topic", "signature", "entry_point"]).to_pylist()
        params = c.sampling(n=c.questions_per_topic)
        responses = generate(get_backend(c.backend), QUESTION, seeds, params=params)
        rows, dropped = [], []
        for i, (s, r) in enumerate(zip(seeds, responses)):
            if r.error:
                dropped.append((i, "llm_error", {"error": r.error}))
                continue
            for k, comp in enumerate(r.completions):
                q, reason = clean_question(comp.text, signature=s["signature"], entry_point=s["entry_point"])
                if reason:  # evidence: the cut question's length against the limits, and its start
                    cut = cut_question(comp.text)
                    dropped.append((i, reason, {"completion": k, "chars": len(cut), "min": QUESTION_CHARS[0],
                                                "max": QUESTION_CHARS[1], "question": cut[:80]}))
                    continue
                rid = hashlib.sha1(f"{s['id']}:{k}:{q}".encode()).hexdigest()[:16]
                rows.append({"id": rid, "source": f"coding_question:{s['id']}", "topic": s["topic"],
                             "signature": s["signature"], "entry_point": s["entry_point"], "question": q,
                             **r.provenance()})
        return rows, dropped


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9_]+", text.lower())


@dataclass(frozen=True, kw_only=True)
class DedupConfig:
    field: str = "question"
    max_jaccard: float = 0.8     # word 3-gram Jaccard at or above this = near duplicate

    def __post_init__(self):
        require(0 < self.max_jaccard <= 1, f"max_jaccard must be in (0, 1]; got {self.max_jaccard}")


@register
class CodingQuestionDedup(Filter):
    """Keeps the first of each group of (near-)duplicate questions within the table.

    Questions are few (tens to thousands per run) and short, so an all-pairs check over word
    3-gram sets is cheap; the first occurrence wins, the rest say which row they duplicate."""

    name = "coding_question_dedup_v1"
    Config = DedupConfig

    def reasons(self, table: pa.Table) -> tuple[pa.Array, list]:
        """Evidence: the kept row a duplicate repeats (`kept_id`), and for a near one its Jaccard and the limit."""
        texts = table.column(self.config.field).to_pylist()
        ids = table.column("id").to_pylist()
        kept: list[tuple[str, set]] = []
        seen_exact: dict[str, str] = {}
        out: list[str | None] = []
        found: list[dict | None] = []
        for rid, text in zip(ids, texts):
            words = _words(text or "")
            norm = " ".join(words)
            if norm in seen_exact:
                out.append("duplicate_exact")
                found.append({"kept_id": seen_exact[norm]})
                continue
            grams = {tuple(words[i:i + 3]) for i in range(max(1, len(words) - 2))}
            near = next(((k, j) for k, g in kept for j in [_jaccard(grams, g)] if j >= self.config.max_jaccard), None)
            if near is not None:
                out.append("duplicate_near")
                found.append({"kept_id": near[0], "jaccard": near[1], "max": self.config.max_jaccard})
                continue
            seen_exact[norm] = rid
            kept.append((rid, grams))
            out.append(None)
            found.append(None)
        return pa.array(out, pa.string()), found


def _jaccard(a: set, b: set) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


@dataclass(frozen=True, kw_only=True)
class CodingDecontamConfig:
    field: str = "question"
    benchmarks: list[str] = dc_field(default_factory=lambda: ["humaneval", "mbpp"])
    benchmarks_dir: str | None = None   # default: $CIDERMILL_BENCHMARKS, else the copies shipped with cidermill
    min_n: int = 8                      # benchmark texts shorter than this many words are not indexed
    max_n: int = 10                     # longer ones match on any shared 10-word sequence

    def __post_init__(self):
        require(1 <= self.min_n <= self.max_n, f"need 1 <= min_n <= max_n; got {self.min_n}..{self.max_n}")
        check_available(self.benchmarks, benchmarks_dir(self.benchmarks_dir))


_INDEXES: dict[tuple, NgramIndex] = {}


@register
class CodingDecontam(Filter):
    """Drops questions that share an n-gram with a HumanEval prompt/solution or an MBPP text/code
    (reason `contaminated:<benchmark>`), using the corpus decontamination index and tokeniser."""

    name = "coding_decontam_v1"
    Config = CodingDecontamConfig

    def index(self) -> NgramIndex:
        c = self.config
        key = (tuple(c.benchmarks), c.benchmarks_dir, c.min_n, c.max_n)
        if key not in _INDEXES:
            folder = benchmarks_dir(c.benchmarks_dir)
            _INDEXES[key] = NgramIndex.build({b: load_items(b, folder) for b in c.benchmarks},
                                             min_n=c.min_n, max_n=c.max_n)
        return _INDEXES[key]

    def reasons(self, table: pa.Table) -> tuple[pa.Array, list]:
        """Evidence: the first match found per question: `{"benchmark", "item", "ngram", "n"}` (the shared
        words and the benchmark item that has them)."""
        index = self.index()
        docs, ks, pos = index.find(tokenize(table.column(self.config.field).combine_chunks()))
        out: list[str | None] = [None] * table.num_rows
        found: list[dict | None] = [None] * table.num_rows
        keys = index.key(ks, pos)
        for d, key in zip(docs.tolist(), keys.tolist()):
            if out[d] is None:
                found[d] = index.describe(int(key))
                out[d] = f"contaminated:{found[d]['benchmark']}"
        return pa.array(out, pa.string()), found
