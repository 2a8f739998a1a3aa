"""Calibration text for checkpoints without a training blend (training/text_data.py): bad files are refused
with the file and the reason before anything is written."""

from __future__ import annotations

import pytest

from manifests.errors import RecordError, ShardError
from training.chat import load_tokenizer
from training.text_data import text_blend_entry


def test_an_empty_file_or_a_record_without_text_is_refused_naming_it(tmp_path):
    tok = load_tokenizer("bytes")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ShardError, match="empty.jsonl: no records"):
        text_blend_entry(empty, tok, cache_dir=tmp_path / "cache", seq_length=16)
    no_text = tmp_path / "no_text.jsonl"
    no_text.write_text('{"text": "fine"}\n{"body": "wrong field"}\n')
    with pytest.raises(RecordError, match=r"no_text.jsonl \[record 1\]: no non-empty `text` string"):
        text_blend_entry(no_text, tok, cache_dir=tmp_path / "cache", seq_length=16)
    assert not list((tmp_path / "cache").rglob("*.idx"))


def test_documents_become_a_blend_entry_with_their_tokens_and_end_ids(tmp_path):
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    tok = load_tokenizer("bytes")
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"text": "ab"}\n{"text": "xyz"}\n')
    entry = text_blend_entry(docs, tok, cache_dir=tmp_path / "cache", seq_length=16)
    assert entry["blend"][0] == 1.0 and entry["seq_length"] == 16 and entry["eod_id"] == tok.eod_id
    ds = IndexedDataset(entry["blend"][1])
    got = [ds[i].tolist() for i in range(len(ds))]
    assert got == [tok.encode("ab") + [tok.eod_id], tok.encode("xyz") + [tok.eod_id]]
