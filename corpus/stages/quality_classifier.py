"""Model-based quality: a scorer that adds the classifier's probability, and a threshold filter.

Scoring is separate from deciding: `quality_classifier_v1` adds `quality__classifier_score`
(P(looks like the positive training set), float32); `quality_classifier_filter_v1` drops rows below
`min_score` as `low_quality_score`, so a threshold change does not recompute scores.
The model is an artifact made by `cidermill corpus train-classifier` (corpus/classify/).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ..classify.model import QualityModel
from ..classify.train import resolve_model
from manifests.config import require
from ..registry import register
from ..stage import Scorer, ThresholdFilter

DEFAULT_COLUMN = "quality__classifier_score"
_MODELS: dict[str, QualityModel] = {}


@dataclass(frozen=True, kw_only=True)
class QualityClassifierConfig:
    model: str  # artifact directory, or `name` / `name@id` under <models_root>/models/
    models_root: str = "data/root"  # the data root holding models/ (for name references)
    field: str = "text"
    column: str = DEFAULT_COLUMN

    def __post_init__(self):
        require(bool(self.model), "model must name a classifier artifact (path or name)")
        require(self.column.startswith("quality__"), f"column should start with quality__; got {self.column!r}")


def _load(ref: str, root: str) -> QualityModel:
    path = resolve_model(ref, root)
    if path not in _MODELS:
        _MODELS.clear()
        _MODELS[path] = QualityModel.load(path)
    return _MODELS[path]


@register
class QualityClassifier(Scorer):
    """Adds quality__classifier_score from a trained hashed n-gram classifier."""

    name = "quality_classifier_v1"
    Config = QualityClassifierConfig

    def __init__(self, config=None):
        super().__init__(config)
        # resolve now: a missing model is a config error before any work, and the manifest
        # records which artifact scored the data
        self.model_path = resolve_model(self.config.model, self.config.models_root)

    def describe(self) -> dict:
        return {**super().describe(), "model_version": _load(self.model_path, "").manifest["version_id"]}

    def score(self, table: pa.Table) -> dict[str, pa.Array]:
        model = _load(self.model_path, "")
        return {self.config.column: pa.array(model.score(table.column(self.config.field)), pa.float32())}


@dataclass(frozen=True, kw_only=True)
class QualityThresholdConfig:
    min_score: float = 0.5
    column: str = DEFAULT_COLUMN

    def __post_init__(self):
        require(0 <= self.min_score <= 1, f"min_score must be in [0, 1]; got {self.min_score}")


@register
class QualityThreshold(ThresholdFilter):
    """Drops rows whose classifier score is below min_score (`low_quality_score`); null scores drop too."""

    name = "quality_classifier_filter_v1"
    Config = QualityThresholdConfig
    reason = "low_quality_score"
    requires = "quality_classifier_v1"
