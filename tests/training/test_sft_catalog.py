"""Post-training data from the catalog. SFT: tokenized dataset versions: conversations published as a dataset version are
tokenized once into `<name>.sft-<tokenizer>` (token ids + per-token loss mask, manifest written last), reused
on the next request, and read by `train sft` with weights like any source."""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pytest

from manifests import Catalog
from manifests.errors import ConfigError
from training.chat import ByteTokenizer, TemplateConfig, record_messages, tokenize
from training.post_loop import read_records
from training.sft_data import KIND, read_sft_version, tokenize_sft_version

from .helpers import quiet
from .test_sft import REPO

KTO = REPO / "data/samples/preference/llamafactory/kto_en_demo.json.gz"


def _publish(root, name, records):
    table = pa.Table.from_pylist([{"messages": r["messages"], "label": r.get("label", True)} for r in records])
    return Catalog(str(root)).write_table(name, table)


@pytest.fixture()
def chats(tmp_path):
    records = read_records(KTO)
    _publish(tmp_path, "chat-a", records[:120])
    _publish(tmp_path, "chat-b", records[120:220])
    return tmp_path, records


def test_tokenized_version_holds_the_template_ids_and_loss_mask(chats):
    root, records = chats
    version = tokenize_sft_version(root, "chat-a", ByteTokenizer(), TemplateConfig(), log=quiet)
    m = version.manifest
    assert version.name == "chat-a.sft-utf8-bytes" and m.extra["kind"] == KIND
    assert m.parents == [Catalog(str(root)).resolve("chat-a").version_id]
    kept = [r for r in records[:120] if r["label"] is not False]
    (stats,) = m.stats
    assert stats.rows_in == 120 and stats.dropped["kto_label_false"] == 120 - len(kept)
    assert stats.rows_out == m.extra["conversations"] == len(kept)
    docs = read_sft_version(version)
    for rec, doc in zip(kept, docs):  # exactly what the template gives, row order kept
        msgs, tools = record_messages(rec, where="r")
        want = tokenize(msgs, ByteTokenizer(), TemplateConfig(), tools=tools)
        assert doc.ids.tolist() == want.ids.tolist() and doc.trainable.tolist() == want.trainable.tolist()
    assert m.extra["loss_tokens"] == sum(int(d.trainable[1:].sum()) for d in docs)
    # asked again: the same version, nothing new published; another template: another version
    again = tokenize_sft_version(root, "chat-a", ByteTokenizer(), TemplateConfig(), log=quiet)
    assert again.version_id == version.version_id
    assert len(Catalog(str(root)).versions("chat-a.sft-utf8-bytes")) == 1
    other = tokenize_sft_version(root, "chat-a", ByteTokenizer(), TemplateConfig(loss_on=("assistant", "user")),
                                 log=quiet)
    assert other.version_id != version.version_id and other.manifest.extra["loss_tokens"] > m.extra["loss_tokens"]


def _cfg(root, out, **extra):
    from training.post_config import from_dict

    raw = {"name": "cat-sft", "method": "sft", "model": {"shape": "tiny", "vocab_size": 256}, "tokenizer": "bytes",
           "seq_length": 256, "global_batch": 4, "micro_batch": 4, "steps": 3, "seed": 3, "log_every": 0,
           "out_dir": str(out),
           "data": {"root": str(root), "valid_fraction": 0.1,
                    "sources": [{"dataset": "chat-a", "weight": 1.0}, {"dataset": "chat-b", "weight": 2.0}]},
           "optim": {"name": "afm_rmsprop", "peak_lr": 0.01, "warmup_steps": 1, "mup_base_width": 64}}
    raw.update(extra)
    return from_dict(raw)


def test_sft_trains_on_a_weighted_mixture_of_catalog_versions(chats, tmp_path):
    from training.post_loop import data_id
    from training.sft import audit, prepare, train_sft

    root, records = chats
    cfg = _cfg(root, tmp_path / "run")
    data = prepare(cfg, log=quiet)
    # weights: chat-b's training conversations are drawn twice per epoch
    a = sum(1 for r in records[:120] if r["label"] is not False)
    b = sum(1 for r in records[120:220] if r["label"] is not False)
    valid = [max(1, round(n * 0.1)) for n in (a, b)]
    packed = data.counters["pack_conversations"] + data.counters["pack_dropped_no_loss_after_cut"]
    assert packed == (a - valid[0]) + 2 * (b - valid[1])
    assert sorted(v.split("@")[0] for v in data.counters["versions"]) == ["chat-a.sft-utf8-bytes",
                                                                           "chat-b.sft-utf8-bytes"]
    lines = []
    audit(cfg, out=lines.append)
    assert re.search(r"\[\[[^\]]*\|user\|>", "\n".join(lines))  # the user turn is inside a masked span
    result = train_sft(cfg, log=quiet)
    manifest = json.loads((result.checkpoint / "checkpoint.json").read_text())
    assert manifest["data"]["source_id"] == data.data_id
    assert len(manifest["data_counters"]["versions"]) == 2
    # a new version of a source is new data: another data id
    before = data_id(cfg)
    _publish(root, "chat-a", records[:60])
    assert data_id(cfg) != before


def test_catalog_sources_need_a_root_and_sft():
    from training.post_config import from_dict

    base = {"name": "x", "model": {"shape": "tiny", "vocab_size": 256}}
    with pytest.raises(ConfigError, match="set data.root"):
        from_dict({**base, "method": "sft", "data": {"sources": [{"dataset": "chat-a"}]}})
    with pytest.raises(ConfigError, match="exactly one of `path`"):
        from_dict({**base, "method": "sft", "data": {"sources": [{"dataset": "a", "path": "b"}], "root": "r"}})


def test_single_turn_generator_rows_become_conversations_and_bad_rows_are_counted(tmp_path):
    rows = [{"prompt": "What is 3*4?", "response": "3*4 = 12. The answer is 12."},
            {"prompt": "What is 5-2?", "response": ""},  # nothing to train on: dropped as malformed
            {"prompt": "Summarise: cats sleep a lot.", "response": "Cats sleep much of the day."}]
    Catalog(str(tmp_path)).write_table("synth-math", pa.Table.from_pylist(rows))
    version = tokenize_sft_version(tmp_path, "synth-math", ByteTokenizer(), TemplateConfig(), log=quiet)
    (stats,) = version.manifest.stats
    assert stats.rows_out == 2 and stats.dropped == {"no_loss_token": 0, "kto_label_false": 0, "malformed": 1}
    first = read_sft_version(version)[0]
    text = bytes(first.ids.tolist()).decode()
    assert text == "<|user|>\nWhat is 3*4?<|end|>\n<|assistant|>\n3*4 = 12. The answer is 12.<|end|>\n"
    assert bytes(first.ids[first.trainable].tolist()).decode() == "3*4 = 12. The answer is 12.<|end|>\n"


def test_pairs_from_a_catalog_version_equal_the_same_pairs_from_the_file(tmp_path):
    """RM / DPO: a dataset version's rows are pair records, read through its manifest."""
    from training.post_config import from_dict
    from training.prefs import load_pairs

    path = REPO / "data/samples/preference/llamafactory/dpo_en_demo.json.gz"
    records = read_records(path)[:40]
    version = Catalog(str(tmp_path)).write_table("prefs-demo", pa.Table.from_pylist(records))
    base = {"name": "p", "method": "rm", "model": {"shape": "tiny", "vocab_size": 256}, "seq_length": 256,
            "rm": {}}
    from_file = from_dict({**base, "data": {"sources": [{"path": str(path), "format": "llamafactory",
                                                         "max_records": 40}]}})
    from_catalog = from_dict({**base, "data": {"root": str(tmp_path),
                                               "sources": [{"dataset": "prefs-demo", "format": "llamafactory"}]}})
    tok = ByteTokenizer()
    (tf, vf, _), (tc, vc, counters) = load_pairs(from_file, tok), load_pairs(from_catalog, tok)
    assert counters["versions"] == [f"prefs-demo@{version.version_id}"]
    for a, b in zip(tf + vf, tc + vc):
        assert a.chosen.ids.tolist() == b.chosen.ids.tolist() and a.rejected.ids.tolist() == b.rejected.ids.tolist()
    assert len(tf + vf) == len(tc + vc) == 40
    assert tc[0].pair.source.startswith("prefs-demo@")
