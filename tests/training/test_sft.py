"""SFT: chat template + loss mask + packing on the tiny megatron model (fp32, CPU)."""

from __future__ import annotations

import json

import pytest
import torch

from manifests.errors import RecordError
from training import parallel
from training.chat import ByteTokenizer, TemplateConfig, record_messages, render, tokenize
from training.model import build_model, get_shape
from training.packing import attention_mask, collate, pack
from training.sft import sft_loss

CONVS = [
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"},
     {"role": "assistant", "content": "4."}],
    [{"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Teal, a blue-green."},
     {"role": "user", "content": "Another?"}, {"role": "assistant", "content": "Ochre."}],
    [{"role": "user", "content": "Weather in Oslo?"},
     {"role": "assistant", "content": "", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]},
     {"role": "tool", "content": "{\"temp_c\": 3}"}, {"role": "assistant", "content": "It is 3 C in Oslo."}],
]


@pytest.fixture(scope="module")
def model():
    parallel.setup(parallel.ParallelConfig(), seed=11)
    parallel.seed_everything(11)
    m = build_model(get_shape("tiny", vocab_size=256), seq_length=256)
    m.eval()
    return m


def _logits(model, batch):
    return model(batch["tokens"], batch["position_ids"], batch["attention_mask"])


def test_template_marks_only_assistant_bodies_and_writes_tool_calls_as_the_generator_does():
    tok = tokenize(CONVS[2], ByteTokenizer(), where="c")
    text = bytes(tok.ids.tolist()).decode()
    trained = bytes(tok.ids[tok.trainable].tolist()).decode()
    call = json.dumps({"name": "get_weather", "arguments": {"city": "Oslo"}}, sort_keys=True)
    assert "<|tool_call|>" + call in text
    # exactly the two assistant bodies (with their end markers) carry loss, no header, no user/tool text
    assert trained == "<|tool_call|>" + call + "<|end|>\n" + "It is 3 C in Oslo.<|end|>\n"
    assert [r for r, _, _ in render(CONVS[2])] == ["user", "assistant", "tool", "assistant"]
    # configurable: tool outputs trained too
    tok2 = tokenize(CONVS[2], ByteTokenizer(), TemplateConfig(loss_on=("assistant", "tool")))
    assert bytes(tok2.ids[tok2.trainable].tolist()).decode().count("temp_c") == 1


def test_tool_row_from_the_synth_generator_becomes_a_tool_call_turn():
    row = {"tools": json.dumps([{"name": "f", "parameters": {}}]),
           "messages": json.dumps([{"role": "user", "content": "call f"}]),
           "calls": json.dumps([{"arguments": {"x": 1}, "name": "f"}]), "response": ""}
    msgs, tools = record_messages(row, where="row")
    tok = tokenize(msgs, ByteTokenizer(), tools=tools)
    text = bytes(tok.ids.tolist()).decode()
    assert text.startswith("<|system|>\n<|tools|>\n")
    assert text.endswith('<|assistant|>\n<|tool_call|>{"arguments": {"x": 1}, "name": "f"}<|end|>\n')


def test_malformed_records_and_unreadable_files_name_the_file_record_and_reason(tmp_path):
    import gzip

    from manifests.errors import ShardError
    from training.post_loop import read_records

    bad = [({"messages": "hello"}, "`messages` must be a list of turns; got str"),
           ({"conversations": {"from": "human"}}, "`conversations` must be a list of turns; got dict"),
           ({"messages": '[{"role": "user"', "calls": "[]"}, "a tool-use row's `messages`, `tools` or `calls` is not JSON"),
           ({"messages": '{"role": "user"}', "calls": "[]"}, "`messages` and `calls` must be JSON lists"),
           ({"text": "x"}, "no `messages`, `conversations` or prompt/response fields")]
    for rec, reason in bad:
        with pytest.raises(RecordError, match="data.json") as info:
            record_messages(rec, where="data.json record 7")
        assert info.value.where == "record 7" and reason in info.value.reason
    whole = gzip.compress(json.dumps([{"messages": [{"role": "user", "content": "hi"}]}] * 50).encode())
    (tmp_path / "cut.json.gz").write_bytes(whole[: len(whole) // 2])   # a copy that stopped early
    (tmp_path / "latin1.json").write_bytes('[{"text": "caf\xe9"}]'.encode("latin-1"))
    for name, why in (("cut.json.gz", "EOFError"), ("latin1.json", "UnicodeDecodeError")):
        with pytest.raises(ShardError, match=f"{name}: cannot be read \\({why}"):
            read_records(tmp_path / name)


def test_mask_is_block_diagonal_causal_with_restarting_positions():
    toks = [tokenize(c, ByteTokenizer()) for c in CONVS[:2]]
    packs, _ = pack(toks, 400)
    p = packs[0]
    n0, n1 = p.lengths
    m = attention_mask(p.lengths, 400)
    assert m[n0, n0 - 1]  # second conversation cannot see the first
    assert not m[n0 + 3, n0] and m[n0, n0 + 1]  # causal inside
    assert p.position_ids[n0] == 0 and p.position_ids[n0 + n1 - 1] == n1 - 1
    assert (~m).sum(-1).min() >= 1  # every row (padding too) attends somewhere
    assert p.loss_mask[n0 + n1:].sum() == 0


def test_packed_loss_equals_the_mean_over_unpacked_conversations(model):
    toks = [tokenize(c, ByteTokenizer()) for c in CONVS]
    total_len = sum(len(t.ids) - 1 for t in toks)
    packs, _ = pack(toks, total_len + 17)  # all three in one sequence, then padding
    assert len(packs) == 1 and len(packs[0].lengths) == 3
    with torch.no_grad():
        b = collate(packs)
        packed = float(sft_loss(_logits(model, b), b["labels"], b["loss_mask"]))
        ce_sum = count = 0.0
        for t in toks:  # each alone, in a sequence of exactly its length, with the default causal mask
            alone, _ = pack([t], len(t.ids) - 1)
            b1 = collate(alone)
            logits = model(b1["tokens"], b1["position_ids"], None)
            logp = torch.log_softmax(logits.double(), -1)
            ce = -logp.gather(-1, b1["labels"].unsqueeze(-1)).squeeze(-1)
            ce_sum += float((ce * b1["loss_mask"]).sum())
            count += float(b1["loss_mask"].sum())
    assert abs(packed - ce_sum / count) < 1e-5


def test_tokens_outside_assistant_turns_get_no_gradient(model):
    toks = [tokenize(c, ByteTokenizer()) for c in CONVS]
    packs, _ = pack(toks, 256)
    b = collate(packs)
    logits = _logits(model, b).detach().requires_grad_(True)
    loss = sft_loss(logits, b["labels"], b["loss_mask"])
    loss.backward()
    per_pos = logits.grad.abs().sum(-1)[0]
    masked = b["loss_mask"][0] == 0
    assert masked.sum() > 50 and float(per_pos[masked].max()) == 0.0
    assert float(per_pos[~masked].min()) > 0
    # changing a masked position's target does not change the loss; changing a trained one does
    with torch.no_grad():
        base = float(sft_loss(_logits(model, b), b["labels"], b["loss_mask"]))
        i_masked = int(torch.nonzero(masked)[5])
        i_trained = int(torch.nonzero(~masked)[3])
        for i, same in ((i_masked, True), (i_trained, False)):
            labels = b["labels"].clone()
            labels[0, i] = (labels[0, i] + 7) % 256
            changed = float(sft_loss(_logits(model, b), labels, b["loss_mask"]))
            assert (changed == base) is same


def test_all_zero_mask_is_refused():
    with pytest.raises(RecordError, match="no token carries loss"):
        tokenize([{"role": "user", "content": "hi"}], ByteTokenizer(), where="f.jsonl record 3")
    with pytest.raises(RecordError, match="record 3"):
        tokenize([{"role": "user", "content": "hi"}], ByteTokenizer(), where="f.jsonl record 3")
    with pytest.raises(RecordError, match="all-zero loss mask"):
        sft_loss(torch.zeros(1, 4, 256), torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 4))


REPO = __import__("pathlib").Path(__file__).resolve().parents[2]
KTO = str(REPO / "data/samples/preference/llamafactory/kto_en_demo.json.gz")


def sft_cfg(out_dir, **extra):
    from training.post_config import from_dict

    raw = {"name": "t-sft", "method": "sft", "model": {"shape": "tiny", "vocab_size": 256},
           "data": {"sources": [{"path": KTO, "max_records": 120}], "valid_fraction": 0.15},
           "seq_length": 256, "optim": {"name": "afm_rmsprop", "peak_lr": 0.03, "warmup_steps": 3,
                                        "mup_base_width": 64},
           "global_batch": 4, "micro_batch": 2, "steps": 12, "seed": 5, "out_dir": str(out_dir), "log_every": 0}
    raw.update(extra)
    return from_dict(raw)


def test_sft_trains_on_real_conversations_and_held_out_loss_falls(tmp_path):
    from training.sft import train_sft

    r = train_sft(sft_cfg(tmp_path / "a", steps=25), log=lambda *_: None)
    start, end = r.evals[0][1]["loss"], r.evals[-1][1]["loss"]
    assert end < start - 1.0, (start, end)  # from ~ln 256 = 5.5 towards byte-level English
    assert r.losses[-1] < r.losses[0]


def test_sft_resumes_exactly(tmp_path):
    from training.checkpoint import latest
    from training.sft import train_sft

    full = train_sft(sft_cfg(tmp_path / "full", steps=6), log=lambda *_: None)
    train_sft(sft_cfg(tmp_path / "cut", steps=6), stop_after=3, log=lambda *_: None)
    assert latest(tmp_path / "cut").step == 3
    resumed = train_sft(sft_cfg(tmp_path / "cut", steps=6), resume="auto", log=lambda *_: None)
    assert resumed.losses == full.losses[3:]
    a = torch.load(full.checkpoint / "model.pt")
    b = torch.load(resumed.checkpoint / "model.pt")
    assert all(torch.equal(a[k], b[k]) for k in a if torch.is_tensor(a[k]))


def test_audit_cli_prints_a_packed_sample_with_masked_spans(tmp_path, capsys):
    import yaml

    from manifests.main import main

    cfg = tmp_path / "sft.yaml"
    cfg.write_text(yaml.safe_dump({"name": "audit", "method": "sft", "model": {"shape": "tiny", "vocab_size": 256},
                                   "data": {"sources": [{"path": KTO, "max_records": 40}]}, "seq_length": 2048}))
    assert main(["train", "sft", str(cfg), "--audit"]) == 0
    out = capsys.readouterr().out
    assert "--- conversation 1 (positions 0.." in out and "--- conversation 2" in out
    assert "[[|user|>\n" in out and "<|end|>\n<|assistant|>\n]]" in out  # prompt + header masked
    assert "kto_label_false" in out


@pytest.mark.parametrize("path", sorted(p for p in (REPO / "configs/train/post").glob("*.yaml")
                                         if "-itec" not in p.stem),  # iTeC configs: tests/training/test_itec.py
                         ids=lambda p: p.name)
def test_post_training_configs_validate(path):
    from training.post_config import load_config

    cfg = load_config(path)
    assert cfg.method in path.stem and cfg.data.sources
    if cfg.method == "dpo":
        assert cfg.dpo.loss in ("dpo", "ipo")
    if path.stem.startswith("tiny"):  # the CPU configs read data that ships with the repository
        assert all((REPO / s.path).is_file() for s in cfg.data.sources)
