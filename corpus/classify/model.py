"""The classifier artifact: a logistic model over hashed n-grams, saved as a versioned directory.

    <dir>/model.npz      weights (float32, 2**bits), bias
    <dir>/manifest.json  kind, version id (sha256 of model.npz), feature settings, hyperparameters,
                         training data version ids and row counts, held-out accuracy, created_at

Training minimises the L2-regularised logistic loss with L-BFGS (scipy): deterministic, no
learning-rate schedule to tune, seconds for tens of thousands of documents.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
from scipy.optimize import minimize
from scipy.special import expit

from manifests.errors import ConfigError

from .features import featurize

KIND = "cidermill.hashed_ngram_logistic"
SCHEMA_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class TrainParams:
    bits: int = 18  # 2**18 buckets
    max_n: int = 2  # word 1- and 2-grams
    l2: float = 1e-4  # per-example L2 strength
    max_iter: int = 200
    holdout_fraction: float = 0.2
    seed: int = 0


@dataclass
class QualityModel:
    weights: np.ndarray
    bias: float
    params: TrainParams
    manifest: dict = field(default_factory=dict)

    def score(self, text: pa.ChunkedArray | pa.Array) -> np.ndarray:
        """P(positive) per document, float32; empty text gets the bias alone."""
        x = featurize(text, bits=self.params.bits, max_n=self.params.max_n)
        return expit(x @ self.weights + self.bias).astype(np.float32)

    # ---- persistence --------------------------------------------------------------------
    def save(self, parent: str | Path) -> str:
        """Write to `<parent>/<version id prefix>/` (written under a temp name, renamed when complete;
        the same model saved twice is one artifact)."""
        import shutil
        import tempfile

        parent = Path(parent)
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=parent))
        with open(tmp / "model.npz", "wb") as f:
            np.savez(f, weights=self.weights.astype(np.float32), bias=np.float64(self.bias))
        digest = hashlib.sha256((tmp / "model.npz").read_bytes()).hexdigest()
        manifest = {"schema_version": SCHEMA_VERSION, "kind": KIND, "version_id": digest,
                    "params": asdict(self.params), **self.manifest}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
        final = parent / digest[:16]
        if final.exists():
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, final)
        self.manifest = manifest
        return str(final)

    @classmethod
    def load(cls, directory: str | Path) -> "QualityModel":
        directory = Path(directory)
        mpath = directory / "manifest.json"
        if not mpath.exists():
            raise ConfigError(f"{directory} is not a classifier artifact (no manifest.json); train one with "
                              "`cidermill corpus train-classifier --positive REF --negative REF --out NAME`")
        manifest = json.loads(mpath.read_text())
        if manifest.get("kind") != KIND or manifest.get("schema_version") != SCHEMA_VERSION:
            raise ConfigError(f"{mpath}: kind {manifest.get('kind')!r} / schema_version "
                              f"{manifest.get('schema_version')!r} is not {KIND} v{SCHEMA_VERSION}")
        data = (directory / "model.npz").read_bytes()
        if hashlib.sha256(data).hexdigest() != manifest["version_id"]:
            raise ConfigError(f"{directory}/model.npz does not match its manifest's version_id (changed or truncated)")
        z = np.load(directory / "model.npz")
        return cls(z["weights"], float(z["bias"]), TrainParams(**manifest["params"]), manifest)


def train(texts: pa.Array, labels: np.ndarray, params: TrainParams) -> tuple[np.ndarray, float]:
    """Fit weights and bias on (texts, labels in {0, 1})."""
    x = featurize(texts, bits=params.bits, max_n=params.max_n)
    y = labels.astype(np.float64)
    n, d = x.shape
    # balance the classes so a 10:1 split does not learn the prior
    w_pos = n / (2 * max(y.sum(), 1))
    w_neg = n / (2 * max(n - y.sum(), 1))
    sample_w = np.where(y == 1, w_pos, w_neg)

    def loss(theta):
        w, b = theta[:d], theta[d]
        z = x @ w + b
        # log(1 + e^z) - y z, computed stably
        l_i = np.logaddexp(0, z) - y * z
        g = (expit(z) - y) * sample_w
        f = (sample_w * l_i).sum() / n + 0.5 * params.l2 * (w @ w)
        grad = np.empty(d + 1)
        grad[:d] = x.T @ g / n + params.l2 * w
        grad[d] = g.sum() / n
        return f, grad

    res = minimize(loss, np.zeros(d + 1), jac=True, method="L-BFGS-B", options={"maxiter": params.max_iter})
    return res.x[:d].astype(np.float32), float(res.x[d])
