"""A minimal tokenization for tests and the demo fallback: UTF-8 bytes as token ids, id 0 as end-of-document
(NUL never occurs in the text), published as a real mixture manifest over Megatron .bin/.idx files.

The project's real path is the mix area's tokenizer + `cidermill mix build`; this exists so that the trainer
can be tested end to end from mixture manifests without a trained tokenizer.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

BYTE_VOCAB = 256
BYTE_EOD = 0


def encode(text: str) -> np.ndarray:
    ids = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.uint16)
    ids = ids[ids != BYTE_EOD]
    return np.append(ids, np.uint16(BYTE_EOD))


def publish_byte_mixture(root: str | Path, *, name: str, stage: str, seq_length: int, token_budget: int,
                         components: dict[str, tuple[float, list[str]]], seed: int = 1234):
    """components: {component name: (weight, texts)}. Returns the published MixtureManifest."""
    from manifests.catalog import Catalog
    from manifests.mixture import ComponentEntry, MixtureManifest, TokenizedRef

    from .data import write_indexed

    root = Path(root)
    total_w = sum(w for w, _ in components.values())
    entries = []
    for comp, (weight, texts) in components.items():
        docs = [encode(t) for t in texts]
        digest = hashlib.sha256(b"".join(d.tobytes() for d in docs)).hexdigest()
        rel = f"tokenized-bytes/{comp}-{digest[:12]}/data"
        if not (root / (rel + ".idx")).exists():
            write_indexed(root / rel, docs, dtype=np.uint16)
        tokens = int(sum(len(d) for d in docs))
        expected = int(round(weight / total_w * token_budget))
        entries.append(ComponentEntry(
            name=comp, weight=weight / total_w, weight_given=weight,
            dataset={"name": comp, "version_id": digest, "ref": comp},
            tokenized=TokenizedRef(name=f"{comp}-bytes", version_id=digest, prefix=rel, dtype="uint16"),
            documents=len(docs), tokens=tokens, tokens_expected=expected, epochs=expected / tokens))
    mixture = MixtureManifest(
        name=name, stage=stage, seq_length=seq_length, token_budget=token_budget, seed=seed,
        tokenizer={"name": "utf8-bytes", "version_id": None, "kind": "bytes", "vocab_size": BYTE_VOCAB,
                   "eod_id": BYTE_EOD, "pad_id": BYTE_EOD, "model_path": None},
        components=entries, spec={"name": name, "note": "byte-level test mixture"})
    mixture.publish(Catalog(str(root)))
    return mixture


TINY_STAGES = (  # name, stage, seq_length, sequences in the budget, weights (short, long)
    ("tiny-core", "core", 64, 16 * 150, (0.5, 0.5)),
    ("tiny-continued", "continued", 128, 8 * 30, (0.3, 0.7)),
    ("tiny-context", "context-lengthening", 256, 4 * 30, (0.1, 0.9)),
)


def publish_tiny_mixtures(root: str | Path, texts: list[str]) -> list[str]:
    """The CPU stand-ins of the three AFM stage mixtures: documents split at the median length into
    `web-short` and `web-long`; later stages up-weight long documents (the report does so for long context)."""
    texts = sorted(texts, key=len)
    short, long_ = texts[: len(texts) // 2], texts[len(texts) // 2:]
    names = []
    for name, stage, seq, sequences, (w_short, w_long) in TINY_STAGES:
        publish_byte_mixture(root, name=name, stage=stage, seq_length=seq, token_budget=seq * sequences,
                             components={"web-short": (w_short, short), "web-long": (w_long, long_)})
        names.append(name)
    return names


def bundled_c4_texts(repo: str | Path | None = None) -> list[str]:
    """The 300 real C4 documents that ship with the repository (data/samples/c4)."""
    import gzip
    import json

    repo = Path(repo) if repo else Path(__file__).resolve().parents[1]
    with gzip.open(repo / "data" / "samples" / "c4" / "c4_demo.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]
