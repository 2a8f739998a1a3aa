"""URL normalisation, url_dedup_v1 and exact_dedup_v1 build/apply on Parquet shards."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from corpus.dedup.urls import normalise_urls
from corpus.executors.local import LocalTaskMap
from corpus.registry import stage_class


def test_url_normalisation_folds_what_does_not_name_another_page():
    urls = ["https://www.Example.com/A/b/?utm_source=x&q=1#frag", "http://example.com:80/A/b?q=1",
            "https://example.com/A/b?q=2", "HTTP://EXAMPLE.COM/a/b?q=1", None, "  "]
    assert normalise_urls(pa.array(urls)).to_pylist() == [
        "example.com/A/b?q=1", "example.com/A/b?q=1", "example.com/A/b?q=2", "example.com/a/b?q=1", None, None]


def _shards(tmp_path, tables):
    paths = []
    for i, rows in enumerate(tables):
        p = tmp_path / f"s{i}.parquet"
        pq.write_table(pa.Table.from_pylist(rows), p)
        paths.append(str(p))
    return paths


def _run(stage, paths, tmp_path):
    bound = stage.bind(stage.build(paths, workdir=str(tmp_path / "work"), tasks=LocalTaskMap(2)))
    out = [bound(pq.read_table(p)) for p in paths]
    return [r.table.column("id").to_pylist() for r in out], [r.rejects for r in out]


def test_url_dedup_keeps_the_first_in_shard_order_and_rows_without_url(tmp_path):
    paths = _shards(tmp_path, [
        [{"id": "a", "url": "https://ex.com/p"}, {"id": "b", "url": None}, {"id": "c", "url": "http://ex.com/p/#x"}],
        [{"id": "d", "url": "https://www.ex.com/p?utm_medium=m"}, {"id": "e", "url": None},
         {"id": "f", "url": "https://ex.com/q"}],
    ])
    kept, rejects = _run(stage_class("url_dedup_v1")({}), paths, tmp_path)
    assert kept == [["a", "b"], ["e", "f"]]
    assert rejects[1].column("drop_reason").to_pylist() == ["duplicate_url"]


def test_exact_dedup_ignores_case_and_whitespace(tmp_path):
    paths = _shards(tmp_path, [
        [{"id": "a", "text": "Hello  World"}, {"id": "b", "text": None}],
        [{"id": "c", "text": "hello world "}, {"id": "d", "text": None}, {"id": "e", "text": "hello, world"}],
    ])
    kept, _ = _run(stage_class("exact_dedup_v1")({}), paths, tmp_path)
    assert kept == [["a", "b"], ["d", "e"]]


def test_a_missing_column_names_the_shard_and_the_fix(tmp_path):
    import pytest

    from manifests.errors import ConfigError

    paths = _shards(tmp_path, [[{"id": "a", "text": "x"}]])
    for name in ("url_dedup_v1", "minhash_dedup_v1", "exact_dedup_v1"):
        stage = stage_class(name)({"field": "body"})
        with pytest.raises(ConfigError, match=r"s0.parquet has no column 'body'.*set `field:`"):
            stage.build(paths, workdir=str(tmp_path / name), tasks=LocalTaskMap(1))
