"""Readers turn one input file into a stream of Arrow tables with `id` and `source` columns.

A reader reports a broken record through `on_record_error` (counted as a drop by reason, the task
goes on) and a broken file by raising ShardError after yielding what it could read.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, ClassVar, Iterator

import pyarrow as pa

from manifests.errors import RecordError
from manifests.storage import Location

from manifests.config import build_config

OnRecordError = Callable[[RecordError], None]


@dataclass(frozen=True)
class InputFile:
    """One input of a run: where it is and the stable key its row ids derive from."""

    location: Location
    key: str  # path relative to the inputs' common base: stable across machines


def stable_id(key: str, index: int) -> str:
    return hashlib.blake2b(f"{key}#{index}".encode(), digest_size=8).hexdigest()


def stable_ids(key: str, start: int, count: int) -> pa.Array:
    return pa.array([stable_id(key, i) for i in range(start, start + count)], pa.string())


class Reader(ABC):
    format: ClassVar[str]
    Config: ClassVar[type]

    def __init__(self, config=None):
        self.config = build_config(self.Config, config, where=f"input (format {self.format})")

    @abstractmethod
    def read(self, source: InputFile, *, batch_rows: int, on_record_error: OnRecordError) -> Iterator[pa.Table]:
        ...
