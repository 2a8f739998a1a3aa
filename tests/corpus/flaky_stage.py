"""A stage that raises RetryableError its first `fail_times` calls (counted in a file, so worker
processes share the count). Imported by tests only."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from corpus.registry import register
from corpus.stage import Mapper
from manifests.errors import RetryableError


@dataclass(frozen=True, kw_only=True)
class FlakyConfig:
    counter: str  # a file holding one character per call so far
    fail_times: int = 1


@register
class FlakyOnce(Mapper):
    name = "test_flaky_v1"
    Config = FlakyConfig

    def transform(self, table: pa.Table):
        with open(self.config.counter, "a+") as f:
            f.seek(0)
            calls = len(f.read())
            f.write("x")
        if calls < self.config.fail_times:
            raise RetryableError(f"flaky call {calls + 1}")
        return table, None
