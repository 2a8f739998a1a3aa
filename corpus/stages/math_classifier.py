"""`math_classifier_v1` scores P(math) per row; `math_classifier_filter_v1` keeps rows above a threshold.

Score then decide: the threshold lives in the filter, so changing it does not recompute scores.
The model is corpus/math/classifier.py's (default: the one shipped in corpus/math/models with its
manifest; or `model_path`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from manifests.errors import ConfigError

from manifests.config import require
from ..math.classifier import load_model, predict
from ..registry import register
from ..stage import Scorer, ThresholdFilter

SCORE = "math__classifier_score"


@dataclass(frozen=True, kw_only=True)
class MathClassifierConfig:
    model_path: str | None = None  # None: the shipped model (corpus/math/models/math_classifier_v1.npz)
    field: str = "text"
    max_chars: int = 20000  # long pages are scored on their beginning

    def __post_init__(self):
        require(self.max_chars > 0, f"max_chars must be > 0; got {self.max_chars}")


@register
class MathClassifier(Scorer):
    """Adds math__classifier_score = P(math) from the math quality classifier."""

    name = "math_classifier_v1"
    Config = MathClassifierConfig

    def resources(self) -> dict:
        from ..math.classifier import DEFAULT_MODEL

        return {"model": self.config.model_path or DEFAULT_MODEL}

    def score(self, table: pa.Table) -> dict[str, pa.Array]:
        cfg = self.config
        if cfg.field not in table.schema.names:
            raise ConfigError(f"{self.name}: no column {cfg.field!r}; set `field:` to the text column")
        texts = pc.utf8_slice_codeunits(table.column(cfg.field), 0, cfg.max_chars).to_pylist()
        return {SCORE: pa.array(predict(load_model(cfg.model_path), texts), pa.float32())}


@dataclass(frozen=True, kw_only=True)
class MathClassifierFilterConfig:
    min_score: float = 0.5

    def __post_init__(self):
        require(0.0 <= self.min_score <= 1.0, f"min_score must be in [0, 1]; got {self.min_score}")


@register
class MathClassifierFilter(ThresholdFilter):
    """Drops rows with math__classifier_score under min_score (or null) as `low_math_score`."""

    name = "math_classifier_filter_v1"
    Config = MathClassifierFilterConfig
    reason = "low_math_score"
    requires = "math_classifier_v1"

    def score_column(self) -> str:
        return SCORE
