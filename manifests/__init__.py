"""The contract between data and training: dataset versions, shards, lineage, mixtures.

Depends on pyarrow only, so a trainer can read a manifest without the data engine.
"""

from .catalog import Catalog, VersionDiff, diff_versions
from .dataset import DatasetVersion, ShardProblem
from .errors import (
    CidermillError, ConfigError, FatalError, ManifestError, RecordError, RetryableError, ShardError,
)
from .manifest import (
    MANIFEST_NAME, SCHEMA_VERSION, Manifest, PipelineInfo, ShardInfo, StageStats,
    canonical_json, config_hash, version_id_of,
)
from .shards import ShardWriter
from .storage import Location

__all__ = [
    "Catalog", "CidermillError", "ConfigError", "DatasetVersion", "FatalError", "Location",
    "MANIFEST_NAME", "Manifest", "ManifestError", "PipelineInfo", "RecordError", "RetryableError",
    "SCHEMA_VERSION", "ShardError", "ShardInfo", "ShardProblem", "ShardWriter", "StageStats",
    "VersionDiff", "canonical_json", "config_hash", "diff_versions", "version_id_of",
]
