"""Train the quality classifier from two catalog versions and publish the artifact.

The held-out split is by a hash of each row's id (stable across runs and machines), so the
reported accuracy is on documents the model never saw. The artifact goes to
`<root>/models/<out>/<version id prefix>/` and records the training data version ids.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from manifests.catalog import Catalog, utc_now
from manifests.errors import ConfigError

from .model import QualityModel, TrainParams, train
from .raw_text import chunk_words, html_to_raw_text

log = logging.getLogger("cidermill.classify")


def _texts(catalog: Catalog, ref: str, field: str, max_docs: int | None,
           exclude_ids: pa.Array | None = None) -> tuple[pa.Table, dict]:
    version = catalog.resolve(ref)
    if field not in version.schema.names:
        raise ConfigError(f"{version.name}@{version.version_id[:12]} has no column {field!r}; "
                          f"its columns: {version.schema.names} (choose one with --field)")
    table = version.read(columns=["id", field])
    if exclude_ids is not None:  # documents of the version to be scored never train the model
        table = table.filter(pa.compute.invert(pa.compute.is_in(table.column("id"), value_set=exclude_ids)))
    if pa.types.is_binary(table.schema.field(field).type):  # HTML payloads: raw page text, chunked
        raw = html_to_raw_text(table.column(field)).to_pylist()
        ids, texts = chunk_words(table.column("id").to_pylist(), raw, chunk_words=300, min_words=50)
        table = pa.table({"id": pa.array(ids, pa.string()), field: pa.array(texts, pa.string())})
    table = table.filter(pa.compute.invert(pa.compute.is_null(table.column(field))))
    if max_docs is not None and table.num_rows > max_docs:
        table = table.slice(0, max_docs)
    return table, {"name": version.name, "version_id": version.version_id, "rows": table.num_rows}


def holdout_mask(ids: pa.ChunkedArray | pa.Array, fraction: float, seed: int) -> np.ndarray:
    h = pl.from_arrow(ids).hash(seed=seed).to_numpy()
    return (h % np.uint64(10_000)) < np.uint64(int(fraction * 10_000))


def train_classifier(catalog: Catalog, *, positive: str, negative: str, out: str, field: str = "text",
                     negative_field: str | None = None, params: TrainParams = TrainParams(),
                     max_docs: int | None = None, exclude: str | None = None) -> QualityModel:
    exclude_ids = None
    if exclude:
        exclude_ids = catalog.resolve(exclude).read(columns=["id"]).column("id").combine_chunks()
    pos, pos_info = _texts(catalog, positive, field, max_docs, exclude_ids)
    neg, neg_info = _texts(catalog, negative, negative_field or field, max_docs, exclude_ids)
    neg = neg.rename_columns(["id", field])
    if pos.num_rows < 5 or neg.num_rows < 5:
        raise ConfigError(f"need at least 5 documents on each side; got {pos.num_rows} positive "
                          f"({positive}), {neg.num_rows} negative ({negative})")
    texts = pa.concat_arrays([pos.column(field).combine_chunks(), neg.column(field).combine_chunks()])
    ids = pa.concat_arrays([pos.column("id").combine_chunks(), neg.column("id").combine_chunks()])
    labels = np.r_[np.ones(pos.num_rows), np.zeros(neg.num_rows)].astype(np.int8)
    # hold out whole pages: chunks of one page (`id#cN`) stay on one side of the split
    page_ids = pa.compute.replace_substring_regex(ids, r"#c\d+$", "")
    held = holdout_mask(page_ids, params.holdout_fraction, params.seed)
    fit = ~held
    weights, bias = train(texts.filter(pa.array(fit)), labels[fit], params)
    model = QualityModel(weights, bias, params)
    metrics = {}
    if held.any():
        p = model.score(texts.filter(pa.array(held)))
        y = labels[held]
        pred = p >= 0.5
        metrics = {"heldout_rows": int(held.sum()), "heldout_accuracy": float((pred == y).mean()),
                   "heldout_positive_recall": float(pred[y == 1].mean()) if (y == 1).any() else None,
                   "heldout_negative_recall": float((~pred[y == 0]).mean()) if (y == 0).any() else None}
    model.manifest = {"name": out, "created_at": utc_now(), "training_data": {"positive": pos_info,
                      "negative": neg_info, "excluded_version": exclude, "field": field, "negative_field": negative_field or field, "train_rows": int(fit.sum())}, "metrics": metrics}
    path = model.save(Path(catalog.root.path) / "models" / out)
    log.info("classifier %s saved at %s", out, path)
    model.manifest["path"] = path
    return model


def resolve_model(ref: str, root: str | None) -> str:
    """A model reference -> artifact directory: a path to the artifact, or `name` / `name@idprefix`
    under `<root>/models/` (the newest by created_at when no id is given)."""
    p = Path(ref).expanduser()
    if (p / "manifest.json").exists():
        return str(p)
    name, _, prefix = ref.partition("@")
    base = Path(root or "data/root") / "models" / name
    candidates = sorted(d for d in base.glob(f"{prefix}*") if (d / "manifest.json").exists()) if base.is_dir() else []
    if not candidates:
        raise ConfigError(f"no classifier {ref!r} (looked for a path and for {base}/{prefix}*); train one with "
                          f"`cidermill corpus train-classifier --positive REF --negative REF --out {name}`")
    import json

    return str(max(candidates, key=lambda d: json.loads((d / "manifest.json").read_text()).get("created_at", "")))
