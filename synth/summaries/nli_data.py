"""NLI training pairs for the entailment cross-encoder, read from a folder the caller names.

The folder (for this project, `../shared/data/nli`, passed explicitly: product code never reads it) holds
gzip JSON-lines files, one per public source, rows `{id, premise, hypothesis, label, scheme, split}`
with `label` in entailment / neutral / contradiction (3-way) or entailment / not_entailment (binary).
Everything is made binary: 1 = the premise entails the hypothesis, 0 = it does not (neutral and
contradiction alike: an unsupported summary sentence is as bad as a contradicted one).

The scorer reads a summary sentence against a window of a few document sentences, so the long premises
(WiCE's web pages, SummEdits' documents) are cut the same way: the document sentences that share the
most content words with the hypothesis, kept in document order, up to a word budget. SummEdits' summaries
are split into sentences: a sentence of an inconsistent summary that also occurs in a consistent summary
of the same document is labelled consistent, the others inconsistent (an edit changes one sentence, and
the label of the others is then known).

The held-out part is chosen by a hash of the premise's normalised text (`holdout_fraction` of premises,
per source), so no premise is on both sides, and the same rows are held out on every run.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from synth.summaries.features import sentences, tokens, _STOP

LABELS = {"entailment": 1, "neutral": 0, "contradiction": 0, "not_entailment": 0}
LONG_PREMISE_WORDS = 160  # a premise longer than this is cut to its best-matching sentences
WINDOW_WORDS = 80  # the word budget of a cut premise (about a 3-sentence document window)


@dataclass(frozen=True)
class Pair:
    source: str
    id: str
    premise: str
    hypothesis: str
    label: int  # 1 = entailed
    heldout: bool


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def is_heldout(premise: str, fraction: float) -> bool:
    h = int.from_bytes(hashlib.sha256(_norm(premise).encode()).digest()[:8], "big")
    return h / 2**64 < fraction


def best_window(document: str, hypothesis: str, *, max_words: int = WINDOW_WORDS) -> str:
    """The document sentences sharing most content words with `hypothesis`, greedily added in order of
    overlap while the word budget lasts, and joined back in document order."""
    sents = sentences(document)
    hyp = {t for t in tokens(hypothesis) if t not in _STOP}
    ranked = sorted(range(len(sents)), key=lambda i: -len(hyp & set(tokens(sents[i]))))
    chosen, n_words = [], 0
    for i in ranked:
        w = len(sents[i].split())
        if chosen and n_words + w > max_words:
            continue
        chosen.append(i)
        n_words += w
        if n_words >= max_words:
            break
    return " ".join(sents[i].strip()[:2000] for i in sorted(chosen))


def _summedits_sentence_pairs(rows: list[dict]) -> list[tuple[dict, str, int]]:
    """(row, summary sentence, label) for SummEdits: each sentence of a consistent summary is consistent;
    a sentence of an inconsistent summary is consistent only if a consistent summary of the same document
    has it too."""
    good: dict[str, set[str]] = {}
    for r in rows:
        if LABELS[r["label"]] == 1:
            good.setdefault(r["premise"], set()).update(_norm(s) for s in sentences(r["hypothesis"]))
    out = []
    for r in rows:
        ok = LABELS[r["label"]] == 1
        for s in sentences(r["hypothesis"]):
            out.append((r, s, int(ok or _norm(s) in good.get(r["premise"], set()))))
    return out


def read_source(path: Path, *, holdout_fraction: float) -> list[Pair]:
    """All pairs of one source file (binary labels, long premises cut); a bad row is an error naming the
    file, the line and the reason."""
    source = path.name.split(".")[0]
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: line {n}: not JSON ({exc.msg})") from None
            if r.get("label") not in LABELS:
                raise ValueError(f"{path}: line {n}: label {r.get('label')!r} is none of {sorted(LABELS)}")
            for key in ("premise", "hypothesis"):
                if not isinstance(r.get(key), str) or not r[key].strip():
                    raise ValueError(f"{path}: line {n}: {key} must be a non-empty string")
            rows.append(r)
    if source == "summedits":
        triples = _summedits_sentence_pairs(rows)
    else:
        triples = [(r, r["hypothesis"], LABELS[r["label"]]) for r in rows]
    out = []
    for k, (r, hyp, label) in enumerate(triples):
        premise = r["premise"]
        if len(premise.split()) > LONG_PREMISE_WORDS:
            premise = best_window(premise, hyp)
        out.append(Pair(source, f"{r['id']}#{k}" if source == "summedits" else r["id"], premise, hyp, label,
                        is_heldout(r["premise"], holdout_fraction)))
    return out


def read_folder(folder: str | Path, *, holdout_fraction: float = 0.05) -> tuple[list[Pair], dict[str, str]]:
    """Every pair of every `*.jsonl.gz` file in `folder`, and the sha256 of each file read."""
    folder = Path(folder)
    files = sorted(folder.glob("*.jsonl.gz"))
    if not files:
        raise FileNotFoundError(f"{folder}: no *.jsonl.gz files; pass --data with the NLI folder")
    pairs, hashes = [], {}
    for path in files:
        hashes[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
        pairs.extend(read_source(path, holdout_fraction=holdout_fraction))
    return pairs, hashes
