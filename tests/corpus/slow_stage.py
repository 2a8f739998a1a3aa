"""A stage that sleeps per batch, so a test can kill a run mid-way. Imported by tests only."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pyarrow as pa

from corpus.registry import register
from corpus.stage import Mapper


@dataclass(frozen=True, kw_only=True)
class SleepConfig:
    seconds_per_batch: float = 0.05


@register
class SleepPerBatch(Mapper):
    name = "test_sleep_v1"
    Config = SleepConfig

    def transform(self, table: pa.Table):
        time.sleep(self.config.seconds_per_batch)
        return table, None
