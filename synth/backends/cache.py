"""On-disk response cache keyed by request hash (sqlite, one file, safe across processes).

A rerun or a resumed run asks the cache first and generates only what is missing. Values are the
completions as JSON; failed requests are never stored, so they are retried next time. Answers are stored
one by one as they arrive (`Backend.generate`), each in its own transaction, so a killed run keeps them.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path

from manifests.errors import ManifestError


def default_cache_path(root: str | os.PathLike) -> str:
    """Where a data root keeps its LLM responses."""
    return str(Path(root) / "_cache" / "llm_responses.sqlite")


class ResponseCache:
    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()   # sqlite connections are per thread
        with self._guard():
            with self._conn() as conn:
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, backend TEXT, model TEXT, "
                    "completions TEXT NOT NULL, created REAL)")

    @contextlib.contextmanager
    def _guard(self):
        """A damaged cache file is one clear error naming it, not a sqlite traceback: its answers cannot be
        read, and deciding to regenerate them (and pay again) is the user's."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise ManifestError(f"response cache {self.path} cannot be used ({exc}); move it aside to keep it "
                                "for recovery, and the run starts a new cache (answers not in it are generated "
                                "again)") from None
        except ValueError as exc:  # a row whose completions are not JSON
            raise ManifestError(f"response cache {self.path} holds a damaged entry ({exc}); move the file "
                                "aside") from None

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60)
            conn.execute("PRAGMA journal_mode=WAL")    # readers do not block the writer
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def get_many(self, keys: list[str]) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        with self._guard():
            conn = self._conn()
            for start in range(0, len(keys), 500):   # sqlite's bound-variable limit
                chunk = keys[start:start + 500]
                marks = ",".join("?" * len(chunk))
                for key, value in conn.execute(f"SELECT key, completions FROM responses WHERE key IN ({marks})",
                                               chunk):
                    out[key] = json.loads(value)
        return out

    def put_many(self, items: dict[str, list[dict]], *, backend: str, model: str) -> None:
        now = time.time()
        with self._guard():
            with self._conn() as conn:
                conn.executemany(
                    "INSERT OR REPLACE INTO responses (key, backend, model, completions, created) VALUES (?,?,?,?,?)",
                    [(k, backend, model, json.dumps(v, ensure_ascii=False), now) for k, v in items.items()])

    def __len__(self) -> int:
        with self._guard():
            return self._conn().execute("SELECT COUNT(*) FROM responses").fetchone()[0]
