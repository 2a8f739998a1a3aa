"""URL dedup: one row per normalised URL (the first in shard, row order), a global stage.

The normalisation (corpus/dedup/urls.py) folds scheme, host case, `www.`, default ports,
fragments, trailing slashes and tracking parameters. Rows without a URL are kept. Same build/apply
split as exact_dedup_v1; drops `duplicate_url`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from manifests.config import require
from ..dedup.drops import DropIds
from ..dedup.keyed import FirstOccurrenceDedup
from ..dedup.urls import normalise_urls
from ..registry import register


@dataclass(frozen=True, kw_only=True)
class UrlDedupConfig:
    field: str = "url"

    def __post_init__(self):
        require(bool(self.field), "field must name the URL column (e.g. url)")


class ApplyUrlDedup(DropIds):
    name = "url_dedup_v1"
    Config = UrlDedupConfig
    reason = "duplicate_url"


@register
class UrlDedup(FirstOccurrenceDedup):
    """One row per normalised URL (first kept); drops `duplicate_url`."""

    name = "url_dedup_v1"
    Config = UrlDedupConfig
    Apply = ApplyUrlDedup
    artifact = "url_dedup"

    def normalise(self, values: pa.ChunkedArray) -> pa.ChunkedArray:
        return normalise_urls(values)
