"""Exact dedup by a hash of normalised text: a global stage with a build/apply split.

The key is the text, lowercased and with whitespace runs collapsed (configurable); the build/apply
split is corpus/dedup/keyed.py's. Drops `duplicate`; null text is never a duplicate.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from manifests.config import require
from ..dedup.drops import DropIds
from ..dedup.keyed import FirstOccurrenceDedup
from ..registry import register


@dataclass(frozen=True, kw_only=True)
class ExactDedupConfig:
    field: str = "text"
    lowercase: bool = True
    collapse_whitespace: bool = True

    def __post_init__(self):
        require(bool(self.field), "field must name a string column")


def normalised(values: pa.ChunkedArray, cfg: ExactDedupConfig) -> pa.ChunkedArray:
    if cfg.lowercase:
        values = pc.utf8_lower(values)
    if cfg.collapse_whitespace:
        values = pc.utf8_trim_whitespace(pc.replace_substring_regex(values, r"\s+", " "))
    return values


class ApplyExactDedup(DropIds):
    name = "exact_dedup_v1"
    Config = ExactDedupConfig
    reason = "duplicate"


@register
class ExactDedup(FirstOccurrenceDedup):
    """Exact duplicates of normalised text (first occurrence kept); drops `duplicate`."""

    name = "exact_dedup_v1"
    Config = ExactDedupConfig
    Apply = ApplyExactDedup
    artifact = "exact_dedup"

    def normalise(self, values: pa.ChunkedArray) -> pa.ChunkedArray:
        return normalised(values, self.config)
