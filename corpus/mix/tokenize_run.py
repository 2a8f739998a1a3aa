"""Tokenize a dataset version into one Megatron indexed dataset (`tokens.bin/.idx`), published as a
catalog artifact `<source name>.tok-<tokenizer name>`.

Plan: the source's shards are cut into row-range tasks (whole row groups where they fit), so even a
one-shard version keeps both cores busy. Tasks run in a process pool and leave `part-NNNNN.bin/.idx`
plus a marker in a staging directory keyed by (source version, tokenizer, settings): a killed run
resumes where it stopped. At the end the parts are merged in task order with
`IndexedDatasetBuilder.add_index`, so document order is the source's row order.

The artifact's manifest (catalog `Manifest`, shards = tokens.bin and tokens.idx) records:
  rows = documents; shard `tokens` = token count (EOD included); parents = [source id, tokenizer id];
  extra = {kind: "megatron_indexed", prefix: "tokens", dtype, documents, tokens, text_field,
           source: {name, version_id}, tokenizer: {...}, source_shards: [{path, rows, documents, tokens}]}
"""

from __future__ import annotations

import gc
import logging
import math
import os
import shutil
import time
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from manifests import Catalog, DatasetVersion, Manifest, ShardInfo, StageStats, version_id_of
from manifests.errors import ConfigError, FatalError, ShardError
from manifests.manifest import PipelineInfo, config_hash
from manifests.shards import DEFAULT_ROW_GROUP_ROWS

from corpus.executors import make_task_map
from corpus.executors.task import with_retries
from corpus.mix.tokenizer.artifact import tokenizer_identity
from corpus.mix.tokenizer.base import Tokenizer
from corpus.mix.tokenize_task import TaskOutcome, TokenizeTask, indexed_dataset, run_tokenize_task

log = logging.getLogger("cidermill.tokenize")
KIND = "megatron_indexed"
PREFIX = "tokens"
STAGE_NAME = "tokenize_v1"


@dataclass(frozen=True, kw_only=True)
class TokenizeConfig:
    text_field: str = "text"
    workers: int = 0  # 0: one per core
    rows_per_task: int = 0  # 0: two tasks per worker, 256 to 65,536 rows, whole row groups when large
    batch_rows: int = 1024  # documents encoded at a time (bounds memory)
    executor: Literal["local", "ray"] = "local"  # the pipelines' executors run the tasks
    address: str | None = None  # ray cluster address (the data root must be a path every node mounts)
    max_task_retries: int = 1  # RetryableError, as in a pipeline

    def __post_init__(self):
        if self.workers < 0 or self.rows_per_task < 0 or self.batch_rows <= 0 or self.max_task_retries < 0:
            raise ConfigError(f"tokenize: workers, rows_per_task and max_task_retries must be >= 0, "
                              f"batch_rows > 0; got {self}")


def token_dtype(vocab_size: int) -> str:
    """Megatron's choice: uint16 while ids fit (vocab < 65,500), else int32."""
    return np.dtype(indexed_dataset().DType.optimal_dtype(vocab_size)).name


def tokenized_name(source: DatasetVersion, tokenizer: Tokenizer) -> str:
    return f"{source.name}.tok-{tokenizer.name}"


def find_tokenized(catalog: Catalog, source: DatasetVersion, tokenizer: Tokenizer,
                   text_field: str = "text") -> DatasetVersion | None:
    """The published tokenization of `source` by `tokenizer` (same model bytes), if there is one."""
    name = tokenized_name(source, tokenizer)
    for entry in reversed(catalog.versions(name)):
        v = DatasetVersion(entry.location)
        extra = v.manifest.extra
        if extra.get("kind") == KIND and extra.get("source", {}).get("version_id") == source.version_id \
                and extra.get("tokenizer", {}).get("model_sha256") == tokenizer.model_sha256 \
                and extra.get("text_field") == text_field:
            return v
    return None


def auto_rows_per_task(total_rows: int, workers: int) -> int:
    """Two tasks per worker (balance without many re-reads: a task inside a row group decodes the
    group up to its rows), 256 to 65,536 rows, whole 4096-row groups once that large."""
    rows = min(65536, max(256, math.ceil(total_rows / (2 * max(1, workers)))))
    return rows if rows < DEFAULT_ROW_GROUP_ROWS else math.ceil(rows / DEFAULT_ROW_GROUP_ROWS) * DEFAULT_ROW_GROUP_ROWS


def plan_tasks(source: DatasetVersion, config: TokenizeConfig, workdir, dtype: str) -> list[TokenizeTask]:
    per_task = config.rows_per_task or auto_rows_per_task(source.manifest.rows, config.workers or os.cpu_count() or 1)
    tasks = []
    for shard_info, loc in zip(source.manifest.shards, source.shard_locations()):
        # tasks read row ranges of a shard, so none of them sees the whole shard to hash: check it here,
        # once per run (a read at disk speed, small against tokenizing it), before any task starts
        source.check_bytes(shard_info, loc)
        with loc.fs.open_input_file(loc.path) as f:
            meta = pq.ParquetFile(f).metadata
        if meta.num_rows != shard_info.rows:
            raise ShardError(loc.uri, f"holds {meta.num_rows} rows, manifest says {shard_info.rows}")
        for start in range(0, meta.num_rows, per_task):
            tasks.append(TokenizeTask(
                index=len(tasks), shard=loc, shard_rel=shard_info.path, row_start=start,
                row_end=min(start + per_task, meta.num_rows), text_field=config.text_field,
                workdir=workdir, dtype=dtype, batch_rows=config.batch_rows,
            ))
    return tasks


# Tokenizers by model hash, set in the parent before a forked pool starts: forked workers inherit them,
# so a task carries the hash, not the tokenizer (no pickling per task). Elsewhere (Ray, spawn) the task
# carries the tokenizer itself.
_TOKENIZERS: dict[str, Tokenizer] = {}


def _run_one(job: tuple[TokenizeTask, Tokenizer | str, int]) -> TaskOutcome | tuple[str, str]:
    task, tokenizer, retries = job
    tok = _TOKENIZERS[tokenizer] if isinstance(tokenizer, str) else tokenizer
    # ShardError does not survive pickling (its __init__ takes two arguments); send its parts back.
    try:
        return with_retries(lambda: run_tokenize_task(task, tok), retries=retries, what=f"tokenize task {task.index}")
    except ShardError as exc:
        return (exc.path, exc.reason)


def _run_tasks(tasks: list[TokenizeTask], tokenizer: Tokenizer, config: "TokenizeConfig",
               workers: int) -> list[TaskOutcome]:
    """Tokenize tasks go through the executor's task map (local process pool or Ray), its retry loop
    and its marker check (tokenize_task.py): the same machinery as a pipeline's tasks."""
    forked = config.executor == "local"
    tasks_map = make_task_map(config.executor, workers=min(workers, len(tasks)), address=config.address,
                              fork=forked)
    _TOKENIZERS[tokenizer.model_sha256] = tokenizer
    ref: Tokenizer | str = tokenizer.model_sha256 if forked else tokenizer
    # Forked workers share the parent's heap (torch and megatron-core included) copy-on-write; a
    # collection in a worker would touch, and so copy, all of it. Frozen objects are never scanned.
    gc.freeze()
    try:
        outcomes = tasks_map.map(_run_one, [(t, ref, config.max_task_retries) for t in tasks])
    finally:
        gc.unfreeze()
    for o in outcomes:
        if isinstance(o, tuple):
            raise ShardError(*o)
    return outcomes


def tokenize_version(catalog: Catalog, source: DatasetVersion | str, tokenizer: Tokenizer,
                     config: TokenizeConfig | None = None, *, reuse: bool = True) -> DatasetVersion:
    """Tokenize `source` (a version or catalog ref) and publish the indexed dataset; reuse a published one."""
    config = config or TokenizeConfig()
    if not catalog.root.is_local:
        raise ConfigError(f"tokenize: the data root {catalog.root.uri} is not a local path; Megatron indexed "
                          "datasets are written with local file I/O and read with mmap (use a local or mounted root)")
    source = catalog.resolve(source) if isinstance(source, str) else source
    field = config.text_field
    if field not in source.schema.names:
        raise ConfigError(f"tokenize {source.name}@{source.version_id[:12]}: no column {field!r} "
                          f"(columns: {', '.join(source.schema.names)}); set text_field")
    if not (pa.types.is_string(source.schema.field(field).type) or pa.types.is_large_string(source.schema.field(field).type)):
        raise ConfigError(f"tokenize {source.name}: column {field!r} is {source.schema.field(field).type}, not text")
    if reuse:
        found = find_tokenized(catalog, source, tokenizer, field)
        if found is not None:
            return found
    dtype = token_dtype(tokenizer.vocab_size)  # imports megatron-core (seconds), kept out of the timing
    start = time.perf_counter()
    name = tokenized_name(source, tokenizer)
    workers = config.workers or os.cpu_count() or 1
    # The resolved task size is part of the run key: a resumed run must cut the same tasks.
    config = replace(config, rows_per_task=config.rows_per_task or auto_rows_per_task(source.manifest.rows, workers))
    settings = {"text_field": field, "rows_per_task": config.rows_per_task, "dtype": dtype, "eod_id": tokenizer.eod_id}
    run_key = config_hash({"source": source.version_id, "tokenizer": tokenizer.model_sha256, **settings})
    workdir = catalog.staging_dir(name, run_key)
    workdir.mkdir()
    tasks = plan_tasks(source, config, workdir, dtype)
    try:
        outcomes = _run_tasks(tasks, tokenizer, config, workers)
    except ShardError:
        raise
    except Exception as exc:
        raise FatalError(f"tokenize {source.name}@{source.version_id[:12]}: {type(exc).__name__}: {exc} "
                         f"(finished tasks are kept in {workdir.uri}; rerun to resume)") from exc
    documents = sum(o.documents for o in outcomes)
    tokens = sum(o.tokens for o in outcomes)
    dropped: dict[str, int] = {}
    for o in outcomes:
        for reason, n in o.dropped.items():
            dropped[reason] = dropped.get(reason, 0) + n

    # Merge the parts in task order into tokens.bin/.idx.
    idx_mod = indexed_dataset()
    final = workdir.join(PREFIX).path
    builder = idx_mod.IndexedDatasetBuilder(final + ".bin", dtype=np.dtype(dtype).type)
    for t in tasks:
        _append_part(idx_mod, builder, t.prefix)
    builder.finalize(final + ".idx")

    shards = []
    for suffix, rows, n_tokens in ((".bin", documents, tokens), (".idx", 0, 0)):
        loc = workdir.join(PREFIX + suffix)
        sha, n_bytes = loc.sha256()
        shards.append(ShardInfo(path=PREFIX + suffix, rows=rows, bytes=n_bytes, sha256=sha, tokens=n_tokens))
    per_shard: dict[str, dict] = {}
    for s in source.manifest.shards:
        per_shard[s.path] = {"path": s.path, "rows": s.rows, "documents": 0, "tokens": 0}
    for o in outcomes:
        per_shard[o.shard_rel]["documents"] += o.documents
        per_shard[o.shard_rel]["tokens"] += o.tokens
    seconds = time.perf_counter() - start
    stats = StageStats(STAGE_NAME, rows_in=source.manifest.rows, rows_out=documents, dropped=dropped,
                       counters={"tokens": tokens, "tasks_resumed": sum(o.resumed for o in outcomes)},
                       seconds=seconds)
    tok_info = tokenizer_identity(tokenizer)
    manifest = Manifest(
        name=name,
        version_id=version_id_of([s.sha256 for s in shards]),
        shards=shards,
        schema=pa.schema([("input_ids", pa.list_(pa.from_numpy_dtype(np.dtype(dtype))))]),
        pipeline=PipelineInfo(name="tokenize", stages=[{"name": STAGE_NAME, "config": settings}],
                              config={"source": source.version_id, "tokenizer": tok_info, **settings},
                              code_revision=_code_revision(), config_sha256=run_key),
        parents=[source.version_id] + ([tok_info["version_id"]] if tok_info.get("version_id") else []),
        stats=[stats],
        extra={"kind": KIND, "prefix": PREFIX, "dtype": dtype, "documents": documents, "tokens": tokens,
               "text_field": field, "source": {"name": source.name, "version_id": source.version_id},
               "tokenizer": tok_info, "source_shards": list(per_shard.values())},
    )
    version = catalog.publish(workdir, manifest)
    log.info("tokenized %s@%s: %d docs, %d tokens in %.1f s (%d tasks, %d resumed)", source.name,
             source.version_id[:12], documents, tokens, seconds, len(tasks), stats.counters["tasks_resumed"])
    return version


def _append_part(idx_mod, builder, prefix: str) -> None:
    """`IndexedDatasetBuilder.add_index` without its `gc.collect()`, which takes ~0.6 s per part in a
    process that has imported torch; the index arithmetic is the same."""
    index = idx_mod._IndexReader(idx_mod.get_idx_path(prefix), multimodal=False)
    if index.dtype != builder.dtype:
        raise FatalError(f"{prefix}.idx holds {index.dtype.__name__} ids, the merge writes {builder.dtype.__name__}")
    offset = len(builder.sequence_lengths)
    builder.sequence_lengths.extend(index.sequence_lengths.tolist())
    builder.document_indices.extend((offset + index.document_indices)[1:].tolist())
    del index
    with open(idx_mod.get_bin_path(prefix), "rb") as f:
        shutil.copyfileobj(f, builder.data_file, 16 << 20)


def prefix_of(catalog: Catalog, version: DatasetVersion) -> str:
    """The Megatron prefix of a tokenized version, relative to the data root."""
    if version.manifest.extra.get("kind") != KIND:
        raise ConfigError(f"{version.name}@{version.version_id[:12]} is not a tokenized (megatron_indexed) version")
    rel = version.directory.path[len(catalog.root.path):].lstrip("/")
    return f"{rel}/{version.manifest.extra['prefix']}"


def _code_revision() -> str:
    from manifests.manifest import code_revision

    return code_revision()
