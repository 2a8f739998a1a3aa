"""The chat format follows the tokenizer: ChatML for a tokenizer with ChatML's markers as single tokens (an
imported SmolLM2 / Qwen), the project's template otherwise. Every path that writes turns (SFT tokenization,
preference pairs, rollout prompts and stops, RL prompts and rewards) must agree."""

from __future__ import annotations

import json

import pytest

from corpus.mix.tokenizer import tokenizer_from_bytes
from training.chat import CHATML, CIDERMILL, ByteTokenizer, chat_format, response_text, tokenize
from training.prefs import tokenize_response
from training.rl_loop import stop_ids
from training.rl_tasks import answer_reward, record_prompt
from training.rollout.policy import chat_prompt_ids, stop_sequences

TEXTS = ["What is two plus three? It is five.", "Hello there, how are you today?", "The answer is 5."] * 20


def hf_tokenizer(special: list[str]):
    """A real byte-level BPE tokenizer (the `tokenizers` library) with these special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(TEXTS, trainers.BpeTrainer(vocab_size=300, special_tokens=special,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tokenizer_from_bytes(tok.to_str().encode(), name="test-bpe", eod_token=special[0])


@pytest.fixture(scope="module")
def chatml_tok():
    return hf_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])


@pytest.fixture(scope="module")
def plain_tok():
    return hf_tokenizer(["<|endoftext|>"])


def test_format_follows_the_tokenizer(chatml_tok, plain_tok):
    assert chat_format(chatml_tok) is CHATML
    assert chat_format(plain_tok) is CIDERMILL
    assert chat_format(ByteTokenizer()) is CIDERMILL
    only_start = hf_tokenizer(["<|endoftext|>", "<|im_start|>"])  # both markers must be single tokens
    assert chat_format(only_start) is CIDERMILL


def test_sft_tokenization_in_chatml(chatml_tok):
    msgs = [{"role": "user", "content": "What is two plus three?"}, {"role": "assistant", "content": "It is five."}]
    t = tokenize(msgs, chatml_tok)
    assert chatml_tok.decode(t.ids.tolist()) == ("<|im_start|>user\nWhat is two plus three?<|im_end|>\n"
                                                 "<|im_start|>assistant\nIt is five.<|im_end|>\n")
    trained = chatml_tok.decode(t.ids[t.trainable].tolist())
    assert trained == "It is five.<|im_end|>\n"  # the answer and its end marker, never a header
    im_end = chatml_tok.encode("<|im_end|>")
    assert len(im_end) == 1 and t.ids[t.trainable].tolist().count(im_end[0]) == 1


def test_project_template_unchanged_for_other_tokenizers():
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    t = tokenize(msgs, ByteTokenizer())
    assert bytes(t.ids.tolist()).decode() == "<|user|>\nhi<|end|>\n<|assistant|>\nyo<|end|>\n"
    assert bytes(t.ids[t.trainable].tolist()).decode() == "yo<|end|>\n"


def test_rollout_prompt_and_stop_in_chatml(chatml_tok, plain_tok):
    msgs = [{"role": "user", "content": "Hello there"}]
    ids = chat_prompt_ids(msgs, chatml_tok)
    assert chatml_tok.decode(ids) == "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n"
    assert stop_sequences(chatml_tok) == [chatml_tok.encode("<|im_end|>")]
    assert plain_tok.decode(stop_sequences(plain_tok)[0]) == "<|end|>"


def test_preference_response_ends_with_the_formats_marker(chatml_tok):
    t = tokenize_response([{"role": "user", "content": "Hello there"}], "The answer is 5.", chatml_tok, budget=200)
    assert chatml_tok.decode(t.ids[t.trainable].tolist()) == "The answer is 5.<|im_end|>\n"
    assert chatml_tok.decode(t.ids[~t.trainable].tolist()).endswith("<|im_start|>assistant\n")


def test_rl_prompt_reward_and_stops(chatml_tok):
    p = record_prompt({"messages": [{"role": "user", "content": "What is 2 + 3?"}], "answer": "5"}, chatml_tok,
                      where="f.jsonl record 0")
    assert p.text == "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n"
    # the reward reads the response up to its end marker, in either format: a number after it does not count
    assert answer_reward("The answer is 5.<|im_end|>\n<|im_start|>user\n7", "5") == 1.0
    assert answer_reward("The answer is 5.<|end|>\n7", "5") == 1.0
    assert response_text("a<|im_end|>b<|end|>c") == "a"
    # the configured stops plus the format's marker, each once
    assert stop_ids(("<|end|>",), chatml_tok) == [chatml_tok.encode("<|end|>"), chatml_tok.encode("<|im_end|>")]
    assert stop_ids(("<|end|>",), ByteTokenizer()) == [list(b"<|end|>")]


def test_sft_version_records_the_format(tmp_path, chatml_tok):
    from training.sft_data import _settings

    class Src:
        version_id = "v" * 64

    class Tpl:
        loss_on, max_length = ("assistant",), None

    assert _settings(Src, chatml_tok, Tpl)["template"] == "chatml-v1"
    assert _settings(Src, ByteTokenizer(), Tpl)["template"] == "cidermill-chat-v1"  # unchanged ids for ours
    json.dumps(_settings(Src, chatml_tok, Tpl))


def test_checkpoint_trained_in_another_format_is_refused(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from manifests.errors import ConfigError
    from training import checkpoint

    monkeypatch.setattr(checkpoint, "checkpoint_tokenizer", lambda info: {"kind": "bytes"})
    ok = SimpleNamespace(directory=tmp_path, manifest={"template": "cidermill-chat-v1"})
    assert chat_format(checkpoint.load_checkpoint_tokenizer(ok)) is CIDERMILL
    assert checkpoint.load_checkpoint_tokenizer(SimpleNamespace(directory=tmp_path, manifest={})) is not None
    stale = SimpleNamespace(directory=tmp_path, manifest={"template": "chatml-v1"})
    with pytest.raises(ConfigError, match="trained in the chat format 'chatml-v1'"):
        checkpoint.load_checkpoint_tokenizer(stale)
