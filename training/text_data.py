"""Plain documents as a training blend: for checkpoints that name no pretraining blend (an import-hf of a
released model) and still need calibration, held-out or recovery-training text (quantize palettize / recover).

    entry = text_blend_entry("docs.jsonl.gz", tokenizer, cache_dir=..., seq_length=256)

The file's records (JSON list or JSONL, optionally .gz, as post-training data is read) carry the document in
`text`; each is tokenized with the checkpoint's tokenizer, followed by its end-of-document id, and written once
as a Megatron indexed dataset under `cache_dir`, keyed by the file's and the tokenizer's sha256. The returned
entry has the keys a pretraining checkpoint's manifest `data` has (`blend`, `vocab_size`, `eod_id`,
`source_id`, `seq_length`, `seed`), so everything that reads those (training/quantize/evalset.py,
training/adapters/recovery.py) reads this too; megatron's dataset builder then splits documents into the
training and held-out parts as for any blend.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from manifests.errors import RecordError, ShardError

from .data import write_indexed


def text_blend_entry(path: str | Path, tokenizer, *, cache_dir: str | Path, seq_length: int,
                     seed: int = 1234, field: str = "text") -> dict:
    from .post_loop import read_records

    path = Path(path)
    file_sha = hashlib.sha256(path.read_bytes()).hexdigest()
    tok_sha = tokenizer.describe().get("model_sha256") or tokenizer.describe().get("name")
    key = hashlib.sha256(f"{file_sha}:{tok_sha}:{field}".encode()).hexdigest()[:16]
    prefix = Path(cache_dir) / f"text-{key}" / "data"
    if not Path(str(prefix) + ".idx").exists():
        docs = []
        for i, rec in enumerate(read_records(path)):
            text = rec.get(field)
            if not isinstance(text, str) or not text:
                raise RecordError(str(path), f"record {i}", f"no non-empty `{field}` string")
            docs.append(np.asarray(tokenizer.encode(text) + [tokenizer.eod_id], dtype=np.int32))
        if not docs:
            raise ShardError(str(path), f"no records: give documents as JSONL/JSON records with a `{field}` string")
        write_indexed(prefix, docs, dtype=np.int32)
    return {"blend": [1.0, str(prefix)], "vocab_size": int(tokenizer.vocab_size), "eod_id": int(tokenizer.eod_id),
            "source_id": f"text-{key}", "seq_length": int(seq_length), "seed": int(seed),
            "text_file": str(path.resolve()), "text_sha256": file_sha}
