"""`train export-hf`: the tiny model's logits from megatron and from transformers (Qwen3 layout) agree on real
text in fp32, the tokenizer round-trips, and greedy generation from the export equals megatron's."""

from __future__ import annotations

import json

import pytest
import torch

from training import parallel
from training.byte_mixture import encode
from training.export_hf import export_hf
from training.trainer import load_model, train

from .helpers import quiet, tiny_cfg


@pytest.fixture(scope="module")
def trained(byte_root, tmp_path_factory):
    run = tmp_path_factory.mktemp("export-run")
    return train(tiny_cfg(byte_root, run, steps=30), log=quiet).checkpoint


def test_export_logits_match_megatron(trained, tmp_path, c4_docs):
    transformers = pytest.importorskip("transformers")
    out = export_hf(trained, tmp_path / "hf")
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["Qwen3ForCausalLM"] and config["tie_word_embeddings"] is True
    tok = transformers.AutoTokenizer.from_pretrained(out)
    hf = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    assert type(hf).__name__ == "Qwen3ForCausalLM"

    parallel.setup(parallel.ParallelConfig())
    model, _ = load_model(trained, seq_length=256, parallel_output=False)
    model.eval()
    texts = [d["text"][:200] for d in c4_docs[:4]] + ["Naïve café — 東京, 3.14 ≠ π."]
    for text in texts:
        ids = tok(text)["input_ids"]
        assert ids == [int(x) for x in encode(text)[:-1]]  # id == UTF-8 byte, as the training data has it
        assert tok.decode(ids) == text
        t = torch.tensor([ids])
        with torch.no_grad():
            ours = model(t, torch.arange(t.shape[1])[None], None)
            theirs = hf(t).logits
        assert float((ours - theirs).abs().max()) <= 1e-4

    # generation: transformers' greedy decode (KV cache) equals an argmax loop over megatron's full forward
    prompt = tok(texts[0][:40], return_tensors="pt")["input_ids"]
    generated = hf.generate(prompt, max_new_tokens=12, do_sample=False)[0, prompt.shape[1]:].tolist()
    seq = prompt[0].tolist()
    for _ in range(12):
        t = torch.tensor([seq])
        with torch.no_grad():
            seq.append(int(model(t, torch.arange(len(seq))[None], None)[0, -1].argmax()))
    assert generated == seq[prompt.shape[1]:]
    assert isinstance(tok.decode(generated), str)


def test_sentencepiece_tokenizer_export_matches_sentencepiece(tmp_path, c4_docs):
    """The project's SentencePiece settings (BPE, byte fallback, split digits, identity normalisation, no dummy
    prefix, whitespace kept): the exported folder's AutoTokenizer gives sentencepiece's ids and decodes back."""
    import io

    spm = pytest.importorskip("sentencepiece")
    transformers = pytest.importorskip("transformers")
    from corpus.mix.tokenizer.train import TokenizerTrainConfig
    from training.export_hf import write_tokenizer

    texts = [d["text"] for d in c4_docs]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts[:200]), model_writer=model,
                                   **TokenizerTrainConfig(vocab_size=600).spm_options())
    (tmp_path / "t.model").write_bytes(model.getvalue())
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "t.model"))
    out = tmp_path / "hf"
    out.mkdir()
    write_tokenizer({"kind": "sentencepiece", "model_file": str(tmp_path / "t.model"), "eod_id": sp.eos_id()}, out)
    assert (out / "tokenizer.json").exists() and (out / "tokenizer.model").exists()
    tok = transformers.AutoTokenizer.from_pretrained(out)
    assert tok.eos_token_id == sp.eos_id()
    # config.json / generation_config.json take their ids from this folder: pad is <pad> (3), not EOS (2)
    from training.export_hf import special_ids

    assert special_ids(out) == {"eos_token_id": 2, "pad_token_id": 3, "bos_token_id": 1} == {
        "eos_token_id": sp.eos_id(), "pad_token_id": sp.pad_id(), "bos_token_id": sp.bos_id()}
    for text in texts[200:240] + ["  two  spaces\n\nand 12345 digits — ünïcödé 東京"]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert ids == sp.encode(text)
        assert tok.decode(ids) == text


def test_export_carries_the_chat_template_it_was_trained_with(tmp_path):
    """transformers' apply_chat_template on an exported byte tokenizer gives exactly the ids training.chat
    trains on (plain turns), so a chat server prompts the export as it was trained."""
    transformers = pytest.importorskip("transformers")
    from training.chat import ByteTokenizer, tokenize
    from training.export_hf import write_tokenizer

    out = tmp_path / "hf"
    out.mkdir()
    write_tokenizer({"kind": "bytes", "eod_id": 0}, out)
    tok = transformers.AutoTokenizer.from_pretrained(out)
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi, ünï?"},
            {"role": "assistant", "content": "Hello."}]
    ids = tok.apply_chat_template(msgs, tokenize=True, return_dict=False)
    assert list(ids) == tokenize(msgs, ByteTokenizer()).ids.tolist()
    prompt = tok.apply_chat_template(msgs[:2], tokenize=False, add_generation_prompt=True)
    assert prompt == "<|system|>\nBe brief.<|end|>\n<|user|>\nHi, ünï?<|end|>\n<|assistant|>\n"
