"""Readers on real and broken input: each break is named by file, record and reason."""

from __future__ import annotations

import gzip
import json
import shutil
import zlib

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


# ---- issue 35: hostile input ends in a record or shard error, never in lost good rows ---------------
def _lines(n: int) -> bytes:
    return "".join(json.dumps({"text": f"document {i}"}) + "\n" for i in range(n)).encode()


def test_gzip_zero_padding_after_the_last_member_loses_nothing(tmp_path):
    (tmp_path / "pad.jsonl.gz").write_bytes(gzip.compress(_lines(40000)) + b"\0" * 8)
    tables, errors, exc = _read("jsonl", tmp_path / "pad.jsonl.gz", batch_rows=5000)
    assert exc is None and errors == [] and _rows(tables) == 40000


def test_gzip_trailing_garbage_keeps_every_row_and_names_the_bytes(tmp_path):
    body = gzip.compress(_lines(40000))
    (tmp_path / "junk.jsonl.gz").write_bytes(body + b"\0\0GARBAGE!")
    tables, errors, exc = _read("jsonl", tmp_path / "junk.jsonl.gz", batch_rows=5000)
    assert _rows(tables) == 40000 and errors == []
    assert isinstance(exc, ShardError) and exc.records_read == 40000
    assert exc.reason == (f"8 trailing bytes from byte {len(body) + 2:,} on are not gzip data (ignored; all 40,000 "
                          "lines before them were read)")  # the two zero bytes are padding


def test_a_corrupt_second_member_keeps_every_line_of_the_first_and_names_the_right_line(tmp_path):
    second = bytearray(gzip.compress(_lines(10)))
    second[20:30] = b"\xff" * 10
    (tmp_path / "two.jsonl.gz").write_bytes(gzip.compress(_lines(3000)) + bytes(second))
    tables, _, exc = _read("jsonl", tmp_path / "two.jsonl.gz", batch_rows=500)
    assert _rows(tables) == 3000 and exc.records_read == 3000
    assert "corrupt" in exc.reason and exc.reason.endswith("after line 3000")


def test_a_lone_surrogate_drops_its_record_only(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"text": "ok"}\n{"text": "broken \\ud83d emoji"}\n{"text": "pair \\ud83d\\ude00"}\n'
                     b'{"text": "x", "meta": {"\\udc00": 1}}\n{"text": "last"}\n')
    tables, errors, exc = _read("jsonl", path)
    assert exc is None
    assert pa.concat_tables(tables).column("text").to_pylist() == ["ok", "pair \U0001F600", "last"]
    assert [(e.where, e.reason.split(":")[0]) for e in errors] == [("line 2", "invalid_unicode"),
                                                                   ("line 4", "invalid_unicode")]
    assert "in text (\\ud83d at character 7)" in errors[0].reason and "meta.<key>" in errors[1].reason


def test_absurd_json_is_a_record_error_not_a_crash(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_bytes(b"[" * 200_000 + b"\n" + b'{"text": "n", "v": ' + b"9" * 6000 + b'}\n{"text": "fine"}\n')
    tables, errors, exc = _read("jsonl", path)
    assert exc is None and _rows(tables) == 1
    assert [e.reason for e in errors][0] == "invalid_json: nested too deeply"
    assert errors[1].reason.startswith("invalid_json: Exceeds the limit")


@pytest.mark.parametrize("compress", ["gz", "zst"])
def test_an_enormous_record_is_skipped_unread_and_the_next_ones_read(tmp_path, compress):
    big = b'{"text": "' + b"a" * (24 << 20) + b'"}\n'
    data = b'{"text": "first"}\n' + big + b'{"text": "last"}\n'
    if compress == "gz":
        data = gzip.compress(data, 1)
    else:
        import zstandard

        data = zstandard.ZstdCompressor().compress(data)
    path = tmp_path / f"big.jsonl.{compress}"
    path.write_bytes(data)
    assert path.stat().st_size < 200_000  # a small file that inflates to 24 MiB
    tables, errors, exc = _read("jsonl", path, {"max_record_bytes": "1MiB"})
    assert exc is None
    assert pa.concat_tables(tables).column("text").to_pylist() == ["first", "last"]
    assert [(e.where, e.reason) for e in errors] == [
        ("line 2", f"record_too_large: {len(big):,} bytes > max_record_bytes {1 << 20:,}")]


def _warc_records(path) -> list[bytes]:
    data, out = path.read_bytes(), []
    while data:
        d = zlib.decompressobj(wbits=31)
        out.append(d.decompress(data))
        data = d.unused_data
    return out


def _with_length(record: bytes, delta: int, *, digest: bool) -> bytes:
    head, sep, rest = record.partition(b"\r\n\r\n")
    lines = [ln for ln in head.split(b"\r\n") if digest or not ln.startswith(b"WARC-Block-Digest")]
    lines = [b"Content-Length: %d" % (int(ln.split(b":")[1]) + delta) if ln.startswith(b"Content-Length") else ln
             for ln in lines]
    return b"\r\n".join(lines) + sep + rest


@pytest.mark.parametrize("gz", [True, False])
@pytest.mark.parametrize("delta", [40, -40, 3000])
@pytest.mark.parametrize("digest", [True, False])
def test_a_warc_record_with_a_wrong_content_length_is_dropped_and_the_rest_kept(tmp_path, gz, delta, digest):
    records = _warc_records(SAMPLES / "cc_warc" / "warcfile.warc.gz")
    full, _, _ = _read("warc", SAMPLES / "cc_warc" / "warcfile.warc.gz")
    full_ids = pa.concat_tables(full).column("id").to_pylist()
    k = [i for i, r in enumerate(records) if b"WARC-Type: response" in r][5]  # the sixth response
    records = [_with_length(r, delta if i == k else 0, digest=digest) for i, r in enumerate(records)]
    path = tmp_path / ("w.warc.gz" if gz else "w.warc")
    path.write_bytes(b"".join(gzip.compress(r) for r in records) if gz else b"".join(records))
    tables, errors, exc = _read("warc", path, batch_rows=4)
    kept = pa.concat_tables(tables).column("id").to_pylist()
    assert exc is None
    assert kept == full_ids[:5] + full_ids[6:]  # only the broken record is lost, not the ones after it
    reason = "block_digest_mismatch" if digest else "bad_content_length"
    assert [e.reason.split(":")[0] for e in errors] == [reason]
    assert full_ids[5] in errors[0].where


def test_a_warc_length_off_by_a_few_bytes_is_caught_by_the_block_digest(tmp_path):
    records = _warc_records(SAMPLES / "cc_warc" / "warcfile.warc.gz")
    k = [i for i, r in enumerate(records) if b"WARC-Type: response" in r][2]
    records[k] = _with_length(records[k], 2, digest=True)  # FastWARC reads 2 bytes of the record's end quietly
    (tmp_path / "w.warc.gz").write_bytes(b"".join(gzip.compress(r) for r in records))
    tables, errors, exc = _read("warc", tmp_path / "w.warc.gz")
    assert exc is None and _rows(tables) == 15
    assert [e.reason.split(":")[0] for e in errors] == ["block_digest_mismatch"]


def test_a_truncated_warc_reports_the_records_it_kept(tmp_path):
    data = (SAMPLES / "cc_warc" / "warcfile.warc.gz").read_bytes()
    (tmp_path / "cut.warc.gz").write_bytes(data[: int(len(data) * 0.6)])
    tables, errors, exc = _read("warc", tmp_path / "cut.warc.gz")
    assert isinstance(exc, ShardError) and exc.records_read == _rows(tables) > 0
    assert [e.reason.split(":")[0] for e in errors] == ["truncated_record"]


def test_trailing_bytes_after_the_last_warc_record_keep_every_record(tmp_path):
    data = (SAMPLES / "cc_warc" / "warcfile.warc.gz").read_bytes()
    (tmp_path / "pad.warc.gz").write_bytes(data + b"\0" * 16)
    tables, errors, exc = _read("warc", tmp_path / "pad.warc.gz")
    assert exc is None and errors == [] and _rows(tables) == 16
    (tmp_path / "junk.warc.gz").write_bytes(data + b"junk\n")
    tables, errors, exc = _read("warc", tmp_path / "junk.warc.gz")
    assert _rows(tables) == 16 and exc.records_read == 16
    assert exc.reason.startswith(f"5 bytes from byte {len(data):,} on are not WARC records")
