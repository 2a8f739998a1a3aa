"""The credential model: a weight per feature string (secret_features.py), summed over a candidate's
features and squashed, compared with a threshold chosen on held-out repositories.

The weights ship as JSON (corpus/pii/models/code_secrets_v3.json, no pickle) with their manifest:
training data, settings, the cross-validated figures by held-out repository and how the threshold was
chosen. `python -m evals.data.pii_secret_train --data ../shared/data` rebuilds it (evals/, because the
labelled files live on development machines only).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from itertools import repeat
from pathlib import Path

MODEL_PATH = Path(__file__).resolve().parent / "models" / "code_secrets_v3.json"


@lru_cache(maxsize=4)
def load(path: str = str(MODEL_PATH)) -> tuple[dict[str, float], float]:
    """(weights, threshold) of the shipped model; a missing or broken file is an error naming it."""
    p = Path(path)
    try:
        model = json.loads(p.read_text(encoding="utf-8"))
        return dict(model["weights"]), float(model["threshold"])
    except (OSError, ValueError, KeyError) as e:
        raise RuntimeError(f"{p}: credential model unreadable ({e}); reinstall, or rebuild it with "
                           f"python -m evals.data.pii_secret_train") from None


def probability(feats: list[str], weights: dict[str, float]) -> float:
    # the same sum in the same order as `sum(weights.get(f, 0.0) for f in feats)`, without a Python frame per term
    z = sum(map(weights.get, feats, repeat(0.0, len(feats))))
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))
