"""Real function-calling dialogues (glaive, sharegpt format) -> a seed table, one row per dialogue.

Rows: id, source, tools (JSON text), conversations (JSON text). The dialogues are read as they are;
`examples.py` turns them into single-call examples and tool-intent negatives.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa

from manifests.errors import RecordError

DIALOGUE_SCHEMA = pa.schema([("id", pa.string()), ("source", pa.string()), ("tools", pa.string()),
                             ("conversations", pa.string())])


def load_glaive(path: str | Path, *, limit: int | None = None) -> pa.Table:
    path = Path(path)
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RecordError(str(path), "-", f"not a JSON list of dialogues ({exc})") from None
    rows = []
    for n, rec in enumerate(records):
        if not isinstance(rec, dict) or "conversations" not in rec:
            raise RecordError(str(path), f"record {n}", "no `conversations`")
        conv = json.dumps(rec["conversations"], ensure_ascii=False)
        rows.append({"id": hashlib.sha256(conv.encode()).hexdigest()[:16], "source": f"glaive/{path.name}#{n}",
                     "tools": rec.get("tools") or "[]", "conversations": conv})
    return pa.Table.from_pylist(rows[:limit] if limit else rows, schema=DIALOGUE_SCHEMA)
