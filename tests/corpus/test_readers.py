"""Readers on real and broken input: each break is named by file, record and reason."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus.readers import InputFile, make_reader
from manifests import Location, ShardError

from ..conftest import FIXTURES, SAMPLES, write_jsonl


def _read(fmt, path, options=None, batch_rows=100):
    errors = []
    tables = []
    reader = make_reader(fmt, options or {})
    src = InputFile(Location.parse(str(path)), path.name)
    try:
        for t in reader.read(src, batch_rows=batch_rows, on_record_error=errors.append):
            tables.append(t)
    except ShardError as exc:
        return tables, errors, exc
    return tables, errors, None


def _rows(tables):
    return sum(t.num_rows for t in tables)


def test_jsonl_ids_are_stable_and_sources_name_the_line(tmp_path, c4_docs):
    path = write_jsonl(tmp_path / "a.jsonl.gz", c4_docs[:5], compress="gz")
    t1, errors, exc = _read("jsonl", path)
    t2, _, _ = _read("jsonl", path, batch_rows=2)
    assert exc is None and errors == []
    ids = pa.concat_tables(t1).column("id").to_pylist()
    assert ids == pa.concat_tables(t2).column("id").to_pylist()
    assert len(set(ids)) == 5
    assert pa.concat_tables(t1).column("source").to_pylist()[2] == "a.jsonl.gz#L3"
    assert pa.concat_tables(t1).column("text").to_pylist()[0] == c4_docs[0]["text"]


def test_invalid_utf8_and_bad_json_lines_are_named_and_skipped(tmp_path, c4_docs):
    path = tmp_path / "bad.jsonl"
    good = write_jsonl(tmp_path / "g.jsonl", c4_docs[:3]).read_bytes().splitlines(keepends=True)
    path.write_bytes(good[0] + b'{"text": "caf\xe9 au lait"}\n' + good[1] + b"{not json}\n" + good[2])
    tables, errors, exc = _read("jsonl", path)
    assert exc is None
    assert _rows(tables) == 3
    assert [(e.where, e.reason.split(":")[0]) for e in errors] == [("line 2", "invalid_utf8"), ("line 4", "invalid_json")]
    assert all(e.path.endswith("bad.jsonl") for e in errors)


@pytest.mark.parametrize("compress", ["gz", "zst"])
def test_truncated_compressed_jsonl_keeps_rows_before_the_cut_and_raises(tmp_path, c4_docs, compress):
    full = write_jsonl(tmp_path / f"full.jsonl.{compress}", c4_docs[:200], compress=compress)
    cut = tmp_path / f"cut.jsonl.{compress}"
    cut.write_bytes(full.read_bytes()[: len(full.read_bytes()) // 2])
    tables, errors, exc = _read("jsonl", cut)
    assert isinstance(exc, ShardError)
    assert "cut.jsonl" in str(exc) and "truncated" in str(exc)
    assert 0 < _rows(tables) < 200
    assert exc.records_read == _rows(tables)
    texts = pa.concat_tables(tables).column("text").to_pylist()
    assert texts == [d["text"] for d in c4_docs[: len(texts)]]  # every kept row is whole and in order


def test_truncated_parquet_is_a_shard_error(tmp_path):
    pq.write_table(pa.table({"text": ["a"] * 1000}), tmp_path / "ok.parquet")
    data = (tmp_path / "ok.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) - 20])
    tables, _, exc = _read("parquet", tmp_path / "cut.parquet")
    assert tables == []
    assert isinstance(exc, ShardError) and "cut.parquet" in str(exc) and "Parquet" in str(exc)


def test_parquet_without_ids_gets_stable_ids(tmp_path):
    pq.write_table(pa.table({"body": ["x", "y", "z"]}), tmp_path / "p.parquet")
    tables, _, exc = _read("parquet", tmp_path / "p.parquet", {"text_field": "body"}, batch_rows=2)
    t = pa.concat_tables(tables)
    assert exc is None
    assert t.column_names[:2] == ["id", "source"] and "text" in t.column_names
    assert t.column("source").to_pylist() == ["p.parquet#0", "p.parquet#1", "p.parquet#2"]


def test_common_crawl_warc_reads_every_response():
    tables, errors, exc = _read("warc", SAMPLES / "cc_warc" / "warcfile.warc.gz")
    t = pa.concat_tables(tables)
    assert exc is None and errors == []
    assert t.num_rows == 16
    assert t.column("url").to_pylist()[0] == "http://003338.cn/l41/481397.html"
    assert set(t.column("http_status").to_pylist()) <= {200, 301, 302, 404}
    assert len(set(t.column("id").to_pylist())) == 16


def test_clipped_warc_keeps_nothing_partial_and_names_the_file(tmp_path):
    tables, errors, exc = _read("warc", FIXTURES / "warc" / "clipped.warc.gz")
    assert isinstance(exc, ShardError) and "clipped.warc.gz" in str(exc)
    assert _rows(tables) == 0  # its only response is cut mid-body: dropped, not emitted half
    assert [e.reason.split(":")[0] for e in errors] == ["truncated_record"]
    assert "f3dfa8fa-f031-4a38-90cc-1dcee3d07bb5" in errors[0].where


def test_clueweb_quirks_file_reads(tmp_path):
    tables, errors, exc = _read("warc", FIXTURES / "warc" / "clueweb-quirk.warc.gz")
    t = pa.concat_tables(tables)
    assert exc is None and errors == []
    assert t.num_rows == 29  # WARC/0.18 with malformed dates and EUC-JP pages, all readable
    assert t.column("url").to_pylist()[0] == "http://www.uraharajuku.st/shopdetail/001005000005/019/000/order/"


def test_oversized_payload_is_dropped_with_reason(tmp_path):
    shutil.copy(SAMPLES / "cc_warc" / "warcfile.warc.gz", tmp_path / "w.warc.gz")
    tables, errors, exc = _read("warc", tmp_path / "w.warc.gz", {"max_payload_bytes": 20000})
    assert exc is None
    assert errors and all(e.reason.startswith("payload_too_large") for e in errors)
    assert _rows(tables) + len(errors) == 16


def test_corrupt_block_mid_warc_loses_only_the_damaged_record_and_names_it(tmp_path):
    # One gzip member per record: after the damaged member the reader finds the next record and goes
    # on (issue 35: the records after a broken one are good rows); the damaged bytes are reported.
    data = bytearray((SAMPLES / "dolma_warc" / "sample-0000.warc.gz").read_bytes())
    at = len(data) // 2
    data[at:at + 20] = bytes(b ^ 0xFF for b in data[at:at + 20])
    (tmp_path / "corrupt.warc.gz").write_bytes(bytes(data))
    tables, errors, exc = _read("warc", tmp_path / "corrupt.warc.gz")
    assert exc is None
    full, _, _ = _read("warc", SAMPLES / "dolma_warc" / "sample-0000.warc.gz")
    full_ids = pa.concat_tables(full).column("id").to_pylist()
    offsets = pa.concat_tables(full).column("warc_offset").to_pylist()
    damaged = max(i for i, o in enumerate(offsets) if o <= at)  # the response whose member holds the damage
    kept = pa.concat_tables(tables).column("id").to_pylist()
    assert kept == full_ids[:damaged] + full_ids[damaged + 1:]
    assert {e.reason.split(":")[0] for e in errors} == {"unreadable_bytes"}
    assert any(e.where == f"offset {offsets[damaged]}" and "Gzip decompression error" in e.reason for e in errors)
    assert all(e.path.endswith("corrupt.warc.gz") for e in errors)
