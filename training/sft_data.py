"""Tokenized SFT dataset versions in the catalog: conversations -> our chat template -> token ids and a
per-token loss mask, published as a catalog artifact beside its source (like `corpus.tokenize` publishes
`<name>.tok-<tokenizer>` for pretraining).

    <root>/<source>.sft-<tokenizer>/<id>/tokens.bin/.idx      Megatron indexed dataset, one document per conversation
    <root>/<source>.sft-<tokenizer>/<id>/loss_mask.bin/.idx   the same shape, uint8: 1 = the token is a target
                                                              that carries loss (assistant turn bodies by default)

Its manifest (catalog `Manifest`, written last) records the source version (parent), the tokenizer, the
template (`loss_on`, `max_length`), conversation / token / loss-token counts, and the rows dropped by reason
(`no_loss_token`, `kto_label_false`, `malformed`). The settings hash is the pipeline's `config_sha256`: a
second request with the same source, tokenizer and template reuses the published version.

An SFT run names such sources as `{dataset: REF, weight: W}` with `data.root`; the run's data id holds the
source versions' content ids, and its checkpoints list `name@version` of every tokenized version read.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa

from manifests import Catalog
from manifests.errors import ConfigError, RecordError
from manifests.manifest import Manifest, PipelineInfo, ShardInfo, StageStats, version_id_of

from .chat import Tokenized, chat_format, record_messages, tokenize
from .data import write_indexed

KIND = "sft_tokenized"
STAGE = "sft_tokenize_v1"


def _settings(source, tokenizer, template) -> dict:
    return {"source": source.version_id, "tokenizer": tokenizer.describe(), "template": chat_format(tokenizer).name,
            "loss_on": list(template.loss_on), "max_length": template.max_length}


def settings_key(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def tokenized_name(source_name: str, tokenizer) -> str:
    return f"{source_name}.sft-{tokenizer.describe()['name'].replace('.', '-').replace('_', '-').lower()}"


def find_sft_version(catalog: Catalog, source, tokenizer, template):
    """The published tokenization of `source` with these settings, or None."""
    key = settings_key(_settings(source, tokenizer, template))
    name = tokenized_name(source.name, tokenizer)
    if name not in catalog.names():
        return None
    for entry in reversed(catalog.versions(name)):
        version = catalog.resolve(f"{name}@{entry.version_id}")
        if version.manifest.pipeline is not None and version.manifest.pipeline.config_sha256 == key:
            return version
    return None


def tokenize_sft_version(root: str | Path, ref: str, tokenizer, template, *, log=print):
    """The tokenized SFT version of dataset version `ref` under data root `root` (published if missing)."""
    catalog = Catalog(str(root))
    try:
        source = catalog.resolve(ref)
    except Exception as exc:  # noqa: BLE001 - ManifestError or a missing root
        raise ConfigError(f"SFT data: dataset {ref!r} not found under {root} ({exc})") from None
    if source.manifest.extra.get("kind") == KIND:
        want = settings_key({**_settings(source, tokenizer, template),
                             "source": source.manifest.extra["source"]["version_id"]})
        if source.manifest.pipeline is None or source.manifest.pipeline.config_sha256 != want:
            raise ConfigError(f"SFT data: {source.name}@{source.version_id[:12]} was tokenized with another "
                              "tokenizer or template than this run's; name its source dataset instead")
        return source
    if source.manifest.extra.get("kind"):
        raise ConfigError(f"SFT data: {source.name} is a {source.manifest.extra['kind']} artifact, not conversations")
    found = find_sft_version(catalog, source, tokenizer, template)
    if found is not None:
        return found
    return _publish(catalog, source, tokenizer, template, log=log)


def _publish(catalog: Catalog, source, tokenizer, template, *, log):
    t0 = time.perf_counter()
    settings = _settings(source, tokenizer, template)
    rows = source.read().to_pylist()
    dropped = {"no_loss_token": 0, "kto_label_false": 0, "malformed": 0}
    docs, masks, truncated = [], [], 0
    for i, rec in enumerate(rows):
        where = f"{source.name}@{source.version_id[:12]} row {i}"
        if rec.get("label") is False:
            dropped["kto_label_false"] += 1
            continue
        try:
            messages, tools = record_messages(rec, where=where)
        except RecordError:
            dropped["malformed"] += 1
            continue
        try:
            tok = tokenize(messages, tokenizer, template, tools=tools, where=where)
        except RecordError:
            dropped["no_loss_token"] += 1
            continue
        truncated += tok.truncated
        docs.append(tok.ids)
        masks.append(tok.trainable.astype(np.uint8))
    if not docs:
        raise RecordError(f"{source.name}@{source.version_id[:12]}", "-",
                          f"no usable conversation in {len(rows)} rows (dropped: {dropped})")
    name = tokenized_name(source.name, tokenizer)
    loc = catalog.staging_dir(name, uuid.uuid4().hex)
    staging = Path(loc.path)
    staging.mkdir(parents=True, exist_ok=True)
    dtype = np.uint16 if tokenizer.vocab_size < 65_500 else np.int32
    write_indexed(staging / "tokens", docs, dtype=dtype)
    write_indexed(staging / "loss_mask", masks, dtype=np.uint8)
    n_tokens, n_loss = int(sum(len(d) for d in docs)), int(sum(int(m[1:].sum()) for m in masks))
    shards = []
    for stem, n_rows, count in (("tokens", len(docs), n_tokens), ("loss_mask", len(docs), n_loss)):
        for suffix in (".bin", ".idx"):
            sha, n_bytes = loc.join(stem + suffix).sha256()
            shards.append(ShardInfo(path=stem + suffix, rows=n_rows if suffix == ".bin" else 0, bytes=n_bytes,
                                    sha256=sha, tokens=count if suffix == ".bin" else 0))
    key = settings_key(settings)
    stats = StageStats(STAGE, rows_in=len(rows), rows_out=len(docs), dropped=dict(dropped),
                       counters={"tokens": n_tokens, "loss_tokens": n_loss, "truncated": truncated},
                       seconds=time.perf_counter() - t0)
    manifest = Manifest(
        name=name, version_id=version_id_of([s.sha256 for s in shards]), shards=shards,
        schema=pa.schema([("input_ids", pa.list_(pa.from_numpy_dtype(np.dtype(dtype)))),
                          ("loss_mask", pa.list_(pa.uint8()))]),
        pipeline=PipelineInfo(name="sft_tokenize", stages=[{"name": STAGE, "config": settings}], config=settings,
                              code_revision="", config_sha256=key),
        parents=[source.version_id], stats=[stats],
        extra={"kind": KIND, "prefix": "tokens", "mask_prefix": "loss_mask", "dtype": np.dtype(dtype).name,
               "conversations": len(docs), "tokens": n_tokens, "loss_tokens": n_loss,
               "source": {"name": source.name, "version_id": source.version_id},
               "tokenizer": tokenizer.describe(), "template": {k: settings[k] for k in ("template", "loss_on",
                                                                                        "max_length")}})
    version = catalog.publish(loc, manifest)
    log(f"tokenized {source.name}@{source.version_id[:12]} -> {name}@{version.version_id[:12]}: {len(docs)} "
        f"conversations, {n_tokens} tokens, {n_loss} carry loss (dropped {dropped})")
    return version


def read_sft_version(version) -> list[Tokenized]:
    """The conversations of a tokenized SFT version, in source row order."""
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    base = Path(version.directory.path)
    tokens = IndexedDataset(str(base / version.manifest.extra["prefix"]))
    masks = IndexedDataset(str(base / version.manifest.extra["mask_prefix"]))
    if len(tokens) != len(masks):
        raise RecordError(str(base), "-", f"{len(tokens)} token documents but {len(masks)} loss masks")
    out = []
    for i in range(len(tokens)):
        ids, mask = np.asarray(tokens[i], dtype=np.int64), np.asarray(masks[i]).astype(bool)
        if len(ids) != len(mask):
            raise RecordError(str(base), f"document {i}", f"{len(ids)} tokens but {len(mask)} mask entries")
        out.append(Tokenized(ids, mask, False))
    return out
