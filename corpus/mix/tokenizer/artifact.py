"""Tokenizers as catalog artifacts: `<root>/<name>/<id>/tokenizer.model` (or tokenizer.json), manifest beside it.

The artifact is a catalog version whose one "shard" is the model file (rows = vocabulary size), so
`cidermill data ls/show/verify` work on it and its id is the hash of the model file. Its manifest's
`extra` holds `kind: tokenizer` and `tokenizer: {name, kind, vocab_size, eod_id, pad_id, model_sha256,
model_file, settings, trained_on, sample}`; parents are the dataset versions it was trained on.
"""

from __future__ import annotations

import hashlib
import os
import uuid

import pyarrow as pa

from manifests import Catalog, DatasetVersion, Manifest, ShardInfo, version_id_of
from manifests.errors import ConfigError, ManifestError
from manifests.manifest import PipelineInfo

from corpus.mix.tokenizer.base import Tokenizer, tokenizer_from_bytes

ARTIFACT_KIND = "tokenizer"


def publish_tokenizer(
    catalog: Catalog,
    tokenizer: Tokenizer,
    *,
    name: str,
    settings: dict | None = None,
    trained_on: list[dict] | None = None,
    sample: dict | None = None,
    pipeline: PipelineInfo | None = None,
) -> DatasetVersion:
    """Store the tokenizer's model file as a catalog version named `name`."""
    sha = hashlib.sha256(tokenizer.model_bytes).hexdigest()
    staging = catalog.staging_dir(name, uuid.uuid4().hex)
    file_name = tokenizer.model_file_name
    staging.join(file_name).write_bytes_atomic(tokenizer.model_bytes)
    info = dict(tokenizer.describe(), name=name, model_file=file_name, settings=dict(settings or {}),
                trained_on=list(trained_on or []), sample=dict(sample or {}))
    if getattr(tokenizer, "eod_token", None):
        info["eod_token"] = tokenizer.eod_token
    manifest = Manifest(
        name=name,
        version_id=version_id_of([sha]),
        shards=[ShardInfo(path=file_name, rows=tokenizer.vocab_size, bytes=len(tokenizer.model_bytes), sha256=sha)],
        schema=pa.schema([]),
        pipeline=pipeline,
        parents=[t["version_id"] for t in trained_on or [] if t.get("version_id")],
        extra={"kind": ARTIFACT_KIND, "tokenizer": info},
    )
    return catalog.publish(staging, manifest)


def load_tokenizer(ref: str, *, catalog: Catalog | None = None, eod_token: str | None = None) -> Tokenizer:
    """A tokenizer from a file path (`.model` or `tokenizer.json`) or a catalog ref of an artifact.

    The returned tokenizer carries `artifact`: {version_id, model_path (relative to the data root)}
    for catalog tokenizers, {model_file (absolute)} for files.
    """
    if os.path.isfile(ref):
        with open(ref, "rb") as f:
            data = f.read()
        tok = tokenizer_from_bytes(data, name=os.path.basename(ref), eod_token=eod_token)
        tok.artifact = {"version_id": None, "model_path": None, "model_file": os.path.abspath(ref)}
        return tok
    if catalog is None:
        raise ConfigError(f"tokenizer {ref!r}: no such file, and no catalog given to look it up in")
    try:
        version = catalog.resolve(ref)
    except ManifestError as exc:
        raise ConfigError(f"tokenizer {ref!r}: not a file and not in the catalog {catalog.root.uri} "
                          f"(train one with `cidermill mix train-tokenizer`) [{exc}]") from exc
    extra = version.manifest.extra
    if extra.get("kind") != ARTIFACT_KIND:
        raise ConfigError(f"tokenizer {ref!r}: {version.name}@{version.version_id[:12]} is a "
                          f"{extra.get('kind', 'dataset')} version, not a tokenizer artifact")
    info = extra["tokenizer"]
    loc = version.directory.join(info["model_file"])
    data = loc.read_bytes()
    if hashlib.sha256(data).hexdigest() != info["model_sha256"]:
        raise ManifestError(f"{loc.uri}: sha256 does not match its manifest; the tokenizer file changed")
    tok = tokenizer_from_bytes(data, name=version.name, kind=info["kind"],
                               eod_token=eod_token or info.get("eod_token"))
    rel = loc.path[len(catalog.root.path):].lstrip("/")
    tok.artifact = {"version_id": version.version_id, "model_path": rel, "model_file": None,
                    "settings": info.get("settings", {}), "trained_on": info.get("trained_on", [])}
    return tok


def tokenizer_identity(tok: Tokenizer) -> dict:
    """What tokenized datasets and mixtures record about the tokenizer that made them."""
    art = getattr(tok, "artifact", {}) or {}
    return dict(tok.describe(), version_id=art.get("version_id"), model_path=art.get("model_path"),
                model_file=art.get("model_file"))
