"""Tokenizing a dataset version into Megatron .bin/.idx: content, EOD, counts, parallel = serial,
resume after a crash, reuse, and bad input."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from corpus.mix import TokenizeConfig, find_tokenized, tokenize_version
from corpus.mix.tokenize_run import plan_tasks, token_dtype
from corpus.mix.tokenize_task import run_tokenize_task
from corpus.mix.unigram_proxy import read_indexed
from manifests.errors import ConfigError


def _megatron_docs(version):
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    ds = IndexedDataset(version.directory.join("tokens").path)
    return [np.asarray(ds[i]) for i in range(len(ds))], ds


def test_tokenized_version_holds_every_document_then_eod(catalog, tokenizer):
    src = catalog.resolve("web")
    v = tokenize_version(catalog, src, tokenizer, TokenizeConfig(rows_per_task=64, workers=2))
    m = v.manifest
    texts = src.read(columns=["text"]).column("text").to_pylist()
    docs, ds = _megatron_docs(v)
    assert len(docs) == len(texts) == m.rows == 300
    assert ds.document_indices.tolist() == list(range(301))  # one sequence per document
    for doc, text in zip(docs, texts):
        assert doc[-1] == tokenizer.eod_id and tokenizer.eod_id not in doc[:-1].tolist()
        assert tokenizer.decode(doc[:-1].tolist()) == text
    n_tokens = sum(len(d) for d in docs)
    assert m.tokens == m.extra["tokens"] == n_tokens
    assert [s.path for s in m.shards] == ["tokens.bin", "tokens.idx"]
    assert m.shards[0].tokens == n_tokens and m.shards[0].bytes == n_tokens * 2  # uint16 ids
    assert m.extra["kind"] == "megatron_indexed" and m.extra["dtype"] == "uint16"
    assert m.extra["source"] == {"name": "web", "version_id": src.version_id}
    assert m.extra["tokenizer"]["model_sha256"] == tokenizer.model_sha256
    assert [(s["path"], s["documents"], s["tokens"]) for s in m.extra["source_shards"]] == \
        [(s.path, s.rows, n_tokens) for s in src.manifest.shards]
    assert m.parents == [src.version_id, tokenizer.artifact["version_id"]]
    assert m.stats[0].name == "tokenize_v1" and m.stats[0].rows_out == 300
    assert v.verify() == []
    # our numpy reader agrees with megatron's
    tokens, lengths = read_indexed(v.directory.join("tokens").path)
    assert lengths.tolist() == [len(d) for d in docs] and tokens.tolist() == np.concatenate(docs).tolist()
    # published once: asking again reuses it
    assert tokenize_version(catalog, "web", tokenizer).version_id == v.version_id
    assert find_tokenized(catalog, src, tokenizer).version_id == v.version_id


def test_parallel_tasks_give_the_same_bytes_as_one(catalog, tokenizer):
    many = tokenize_version(catalog, "wiki", tokenizer, TokenizeConfig(rows_per_task=4, workers=2), reuse=False)
    one = tokenize_version(catalog, "wiki", tokenizer, TokenizeConfig(rows_per_task=1000, workers=1), reuse=False)
    assert many.version_id == one.version_id  # ids hash the .bin/.idx bytes


def test_resumes_after_a_crash_without_redoing_finished_tasks(catalog, tokenizer, tmp_path):
    from corpus.mix.tokenize_run import tokenized_name
    from manifests import Catalog
    from manifests.manifest import config_hash

    texts = catalog.resolve("web").read(columns=["text"]).column("text").to_pylist()[:120]
    table = pa.table({"id": [str(i) for i in range(120)], "text": texts})
    cat = Catalog(str(tmp_path / "crashed"))
    src = cat.write_table("web-small", table)
    # A run that died after two of its four tasks: their parts and markers are in the staging dir,
    # task 3 left a half-written part and no marker.
    dtype = token_dtype(tokenizer.vocab_size)
    key = config_hash({"source": src.version_id, "tokenizer": tokenizer.model_sha256, "text_field": "text",
                       "rows_per_task": 30, "dtype": dtype, "eod_id": tokenizer.eod_id})
    workdir = cat.staging_dir(tokenized_name(src, tokenizer), key)
    workdir.mkdir()
    tasks = plan_tasks(src, TokenizeConfig(rows_per_task=30), workdir, dtype)
    assert len(tasks) == 4
    for t in tasks[:2]:
        run_tokenize_task(t, tokenizer)
    workdir.join("part-00002.bin").write_bytes_atomic(b"\x00" * 10)
    resumed = tokenize_version(cat, src, tokenizer, TokenizeConfig(rows_per_task=30, workers=1))
    assert resumed.manifest.stats[0].counters["tasks_resumed"] == 2
    assert not workdir.exists()  # published: the staging dir is gone
    # the same bytes as an uninterrupted run elsewhere
    other = Catalog(str(tmp_path / "fresh"))
    fresh = tokenize_version(other, other.write_table("web-small", table), tokenizer,
                             TokenizeConfig(rows_per_task=30, workers=2))
    assert fresh.manifest.stats[0].counters["tasks_resumed"] == 0
    assert resumed.version_id == fresh.version_id


def test_empty_texts_are_counted_not_silently_dropped(tmp_path, tokenizer):
    from manifests import Catalog

    cat = Catalog(str(tmp_path))
    src = cat.write_table("gappy", pa.table({"id": ["a", "b", "c", "d"], "text": ["one doc", None, "", "two 22"]}))
    v = tokenize_version(cat, src, tokenizer, TokenizeConfig(workers=1))
    assert v.manifest.rows == 2
    assert v.manifest.stats[0].dropped == {"empty_text": 2}
    assert v.manifest.stats[0].rows_in == 4


def test_bad_text_column_is_a_config_error(catalog, tokenizer, tmp_path):
    from manifests import Catalog

    cat = Catalog(str(tmp_path))
    cat.write_table("numbers", pa.table({"id": ["a"], "text": [1]}))
    with pytest.raises(ConfigError, match="not text"):
        tokenize_version(cat, "numbers", tokenizer)
    with pytest.raises(ConfigError, match="no column 'body'"):
        tokenize_version(catalog, "web", tokenizer, TokenizeConfig(text_field="body"))


@pytest.mark.slow
def test_ray_runs_the_same_tokenize_tasks_and_gives_the_same_bytes(catalog, tokenizer):
    """Tokenizing uses the executor's task map, so Ray runs it too; same tasks, same bytes."""
    pytest.importorskip("ray")
    src = catalog.resolve("web")
    local = tokenize_version(catalog, src, tokenizer, TokenizeConfig(rows_per_task=100, workers=2), reuse=False)
    ray_v = tokenize_version(catalog, src, tokenizer, TokenizeConfig(rows_per_task=100, workers=2, executor="ray"),
                             reuse=False)
    assert ray_v.version_id == local.version_id
    assert [s.sha256 for s in ray_v.manifest.shards] == [s.sha256 for s in local.manifest.shards]


def test_a_retryable_error_in_a_tokenize_task_is_retried(catalog, tokenizer, monkeypatch):
    """The executor's retry loop wraps tokenize tasks too (corpus/executors/task.py with_retries)."""
    from corpus.mix import tokenize_run
    from manifests.errors import RetryableError

    calls = []
    real = tokenize_run.run_tokenize_task

    def flaky(task, tok):
        calls.append(task.index)
        if calls.count(task.index) == 1:
            raise RetryableError(f"transient failure in task {task.index}")
        return real(task, tok)

    monkeypatch.setattr(tokenize_run, "run_tokenize_task", flaky)
    src = catalog.resolve("web")
    v = tokenize_version(catalog, src, tokenizer, TokenizeConfig(rows_per_task=150, workers=1, max_task_retries=1),
                         reuse=False)
    assert v.manifest.rows == 300 and sorted(calls) == [0, 0, 1, 1]


def test_a_source_shard_rewritten_after_publishing_is_refused_before_any_task(tmp_path, tokenizer):
    """Issue 35: a version read as input is checked against its manifest. A shard rewritten as a valid Parquet
    file with the same schema, ids and row count (one text changed) passes the row-count check; only its
    sha256 tells, so tokenizing must refuse it, naming the shard, and publish nothing."""
    import pyarrow.parquet as pq

    from corpus.mix.tokenize_run import tokenized_name
    from manifests import Catalog
    from manifests.errors import ManifestError

    cat = Catalog(str(tmp_path))
    src = cat.write_table("small", pa.table({"id": ["a", "b", "c"], "text": ["one doc", "two docs", "three"]}))
    (shard,) = src.shard_locations()
    edited = pq.read_table(shard.path)
    edited = edited.set_column(1, "text", pa.array(["one doc", "two DOCS", "three"]))
    pq.write_table(edited, shard.path)
    assert pq.ParquetFile(shard.path).metadata.num_rows == src.manifest.shards[0].rows  # rows still agree
    with pytest.raises(ManifestError, match=rf"{shard.path}: sha256 \w+ \(\d+ bytes\) does not match the manifest"):
        tokenize_version(cat, src, tokenizer, TokenizeConfig(workers=1))
    assert cat.versions(tokenized_name(src, tokenizer)) == []
