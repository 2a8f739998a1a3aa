"""Summary payloads built from real public text: emails, chat messages and notifications.

The text comes from the C4 sample bundled with the demo (data/samples/c4, real web documents,
ODC-By); only the framing is ours: an email gets a sender, a subject and the first sentences of a
document as its body; a message thread splits the sentences between two people; a notification
is an app name and one or two sentences. Names and apps are drawn from small fixed lists with a
seed, so a payload is reproducible from (document id, kind, seed).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from manifests.config import require
from corpus.registry import register
from synth.generation.generator import Generator, schema_with_provenance
from synth.generation.llm import rule_provenance

KINDS = ("email", "message", "notification")
_PEOPLE = ["Alex Morgan", "Priya Shah", "Tom Becker", "Lena Okafor", "Sam Rivera", "Mei Chen", "Jonas Berg"]
_APPS = ["News", "Calendar", "Mail", "Sports", "Weather", "Shop", "Community"]

PAYLOAD_SCHEMA = schema_with_provenance(
    pa.field("payload", pa.string()), pa.field("kind", pa.string()), pa.field("document_id", pa.string()),
)


def sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])", re.sub(r"\s+", " ", text).strip())
    return [p for p in parts if 3 <= len(p.split()) <= 60]


def min_sentences(kind: str) -> int:
    """Usable sentences a document needs for a payload of this kind."""
    return 1 if kind == "notification" else 3


def make_payload(kind: str, text: str, rng: random.Random, *, max_sentences: int = 6) -> str | None:
    sents = sentences(text)
    if len(sents) < min_sentences(kind):
        return None
    a, b = rng.sample(_PEOPLE, 2)
    if kind == "email":
        body = sents[:max_sentences]
        subject = " ".join(body[0].split()[:8]).rstrip(".,;:")
        return (f"From: {a} <{a.split()[0].lower()}@example.com>\nTo: {b} <{b.split()[0].lower()}@example.com>\n"
                f"Subject: {subject}\n\nHi {b.split()[0]},\n\n{' '.join(body)}\n\nBest,\n{a.split()[0]}")
    if kind == "message":
        lines = [f"{(a, b)[i % 2].split()[0]}: {s}" for i, s in enumerate(sents[:max_sentences])]
        return "\n".join(lines)
    app = rng.choice(_APPS)
    return f"[{app}] {' '.join(sents[:2])}"


def load_c4_sample(path: str | Path, *, limit: int | None = None) -> pa.Table:
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f):
            text = json.loads(line)["text"]
            rows.append({"id": hashlib.sha256(text.encode()).hexdigest()[:16], "source": f"c4_demo#{n}", "text": text})
            if limit and len(rows) >= limit:
                break
    return pa.Table.from_pylist(rows)


@dataclass(frozen=True, kw_only=True)
class PayloadConfig:
    kinds: list[str] = field(default_factory=lambda: list(KINDS))
    max_sentences: int = 6
    seed: int = 0

    def __post_init__(self):
        bad = sorted(set(self.kinds) - set(KINDS))
        require(not bad, f"unknown payload kinds {bad}; choose from {list(KINDS)}")
        require(self.max_sentences >= 3, f"max_sentences must be >= 3; got {self.max_sentences}")


@register
class Payloads(Generator):
    """Documents (id, source, text) -> one payload per document, kinds taken in turn."""

    name = "summary_payloads_v1"
    Config = PayloadConfig
    schema = PAYLOAD_SCHEMA

    def expand(self, table: pa.Table) -> tuple[list[dict], list[tuple[int, str]]]:
        c = self.config
        rows, dropped = [], []
        for i, rec in enumerate(table.select(["id", "source", "text"]).to_pylist()):
            kind = c.kinds[i % len(c.kinds)]
            rng = random.Random(f"{c.seed}:{rec['id']}:{kind}")
            payload = make_payload(kind, rec["text"] or "", rng, max_sentences=c.max_sentences)
            if payload is None:
                dropped.append((i, "too_few_sentences", {"kind": kind, "sentences": len(sentences(rec["text"] or "")),
                                                         "min": min_sentences(kind)}))
                continue
            rows.append({"id": hashlib.sha256(f"{rec['id']}:{kind}".encode()).hexdigest()[:16],
                         "source": rec["source"], "payload": payload, "kind": kind, "document_id": rec["id"],
                         **rule_provenance(f"summary_payload_{kind}", seed=c.seed)})
        return rows, dropped
