"""Harder tool selection and parallel calls, made by rules from validated examples.

- Distractors: each example's tool list gets the k tools from the pool (all tools seen in the
  table, by name) whose embedded name+description is most similar to the oracle tool's, but not
  the same tool. Similar tools are the ones a model confuses; random ones teach nothing.
- Parallel: two single-call examples whose requests stand alone (one user turn) and call different
  tools merge into one request ("A Also, B") answered by both calls, with both tools offered.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from manifests.config import require
from corpus.registry import register
from corpus.stage import Mapper
from corpus.embed import embed
from synth.generation.generator import Generator
from synth.generation.llm import rule_provenance

from synth.stages.tools_examples import TOOL_SFT_SCHEMA, make_row
from synth.tools.schema import tool_text


def tool_pool(rows: list[dict]) -> list[dict]:
    """Distinct tools by name, first description wins (stable across runs)."""
    pool: dict[str, dict] = {}
    for r in rows:
        for t in json.loads(r["tools"]):
            pool.setdefault(t["name"], t)
    return [pool[k] for k in sorted(pool)]


def nearest_tools(pool: list[dict], vectors: np.ndarray, oracle_names: set[str], k: int) -> list[dict]:
    idx = [i for i, t in enumerate(pool) if t["name"] in oracle_names]
    if not idx:
        return []
    sims = (vectors @ vectors[idx].T).max(axis=1)
    order = np.argsort(-sims, kind="stable")
    return [pool[i] for i in order if pool[i]["name"] not in oracle_names][:k]


@dataclass(frozen=True, kw_only=True)
class DistractorConfig:
    k: int = 3
    seed: int = 0

    def __post_init__(self):
        require(self.k >= 1, f"k must be >= 1; got {self.k}")


@register
class AddDistractors(Mapper):
    """Adds k similar tools to every example's tool list (shuffled, seeded); negatives get them too."""

    name = "tool_distractors_v1"
    Config = DistractorConfig

    def transform(self, table: pa.Table):
        rows = table.to_pylist()
        pool = tool_pool(rows)
        vectors = embed([tool_text(t) for t in pool])
        out_tools = []
        for r in rows:
            tools = json.loads(r["tools"])
            names = set(json.loads(r["oracle_tools"])) or {t["name"] for t in tools}
            have = {t["name"] for t in tools}
            extra = [t for t in nearest_tools(pool, vectors, names | have, self.config.k)]
            merged = tools + extra
            random.Random(f"{self.config.seed}:{r['id']}").shuffle(merged)
            out_tools.append(json.dumps(merged, ensure_ascii=False))
        n_tools = pa.array([len(json.loads(t)) for t in out_tools], pa.int32())
        table = table.set_column(table.schema.get_field_index("tools"), "tools", pa.array(out_tools, pa.string()))
        table = table.set_column(table.schema.get_field_index("n_tools"), "n_tools", n_tools)
        return table, None


@dataclass(frozen=True, kw_only=True)
class ParallelConfig:
    max_pairs: int = 100
    max_request_chars: int = 300
    seed: int = 0

    def __post_init__(self):
        require(self.max_pairs >= 0, f"max_pairs must be >= 0; got {self.max_pairs}")


_GREETING = re.compile(r"^(?:hi|hello|hey)(?:\s+there)?[,!.]?\s*", re.I)


def standalone(r: dict, max_chars: int) -> bool:
    msgs = json.loads(r["messages"])
    return (r["kind"] in ("single", "bootstrap") and len(msgs) == 1 and msgs[0]["role"] == "user"
            and len(msgs[0]["content"]) <= max_chars)


@register
class ParallelCalls(Generator):
    """Passes every row through and adds merged parallel-call examples from compatible pairs."""

    name = "tool_parallel_v1"
    Config = ParallelConfig
    schema = TOOL_SFT_SCHEMA

    def expand(self, table: pa.Table) -> tuple[list[dict], list[tuple[int, str]]]:
        c = self.config
        rows = table.select(TOOL_SFT_SCHEMA.names).to_pylist()
        cands = [r for r in rows if standalone(r, c.max_request_chars)]
        rng = random.Random(c.seed)
        rng.shuffle(cands)
        out, used = list(rows), set()
        for i, a in enumerate(cands):
            if len(out) - len(rows) >= c.max_pairs:
                break
            if a["id"] in used:
                continue
            for b in cands[i + 1:]:
                if b["id"] in used or set(json.loads(a["oracle_tools"])) & set(json.loads(b["oracle_tools"])):
                    continue
                qa = json.loads(a["messages"])[0]["content"].strip()
                qb = json.loads(b["messages"])[0]["content"].strip()
                tools = json.loads(a["tools"]) + [t for t in json.loads(b["tools"])
                                                  if t["name"] not in {x["name"] for x in json.loads(a["tools"])}]
                qb = _GREETING.sub("", qb) or qb
                request = f"{qa.rstrip()} Also, {qb[0].lower() + qb[1:]}"
                out.append(make_row(source=f"{a['source']}+{b['source']}", tools=tools,
                                    messages=[{"role": "user", "content": request}],
                                    calls=json.loads(a["calls"]) + json.loads(b["calls"]), kind="parallel",
                                    provenance=rule_provenance("tool_parallel_merge", seed=c.seed)))
                used |= {a["id"], b["id"]}
                break
        return out, []
