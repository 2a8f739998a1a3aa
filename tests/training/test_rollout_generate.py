"""The megatron rollout generator against an independent reference: each sequence run alone through a full
forward pass (no cache, no padding, default causal mask), greedy decoding by argmax of that pass."""

from __future__ import annotations

import pytest
import torch

from manifests.errors import ConfigError
from training import parallel
from training.model import build_model, get_shape
from training.rollout import generate
from training.rollout.sampling import top_p_mask


@pytest.fixture(scope="module")
def model():
    parallel.setup(parallel.ParallelConfig(), seed=11)
    m = build_model(get_shape("tiny", vocab_size=64), seq_length=64, rotary_base=10_000, init_std=0.2)
    return m.eval()


PROMPTS = [[5, 9, 3], [7, 1, 2, 8, 8, 4, 6, 30, 2], [12], [40, 41, 42, 43, 44]]


@torch.no_grad()
def full_logprobs(model, ids: list[int]) -> torch.Tensor:
    """log-softmax of one unpadded sequence, [S, V]."""
    t = torch.tensor([ids])
    logits = model(t, torch.arange(len(ids))[None], None, runtime_gather_output=True)
    return torch.log_softmax(logits[0].float(), dim=-1)


@torch.no_grad()
def greedy_reference(model, prompt: list[int], n: int) -> list[int]:
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(full_logprobs(model, ids)[-1].argmax()))
    return ids[len(prompt):]


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_equals_full_recompute_and_logprobs_match(model, use_cache):
    outs = generate(model, PROMPTS, max_new_tokens=12, temperature=0.0, seed=0, use_cache=use_cache)
    assert [o.index for o in outs] == list(range(len(PROMPTS)))
    for p, o in zip(PROMPTS, outs):
        assert o.prompt_ids == p
        assert o.response_ids == greedy_reference(model, p, 12)
        assert o.finish_reason == "length" and len(o.logprobs) == 12
        ref = full_logprobs(model, p + o.response_ids)
        want = [float(ref[len(p) - 1 + t, tok]) for t, tok in enumerate(o.response_ids)]
        assert max(abs(a - b) for a, b in zip(o.logprobs, want)) < 1e-5
        assert o.sampling_logprobs == [0.0] * 12


def test_sampled_logprobs_match_full_pass_and_are_deterministic(model):
    a = generate(model, PROMPTS, max_new_tokens=10, temperature=0.9, top_p=0.8, seed=5)
    b = generate(model, PROMPTS, max_new_tokens=10, temperature=0.9, top_p=0.8, seed=5, max_batch_size=1)
    c = generate(model, PROMPTS, max_new_tokens=10, temperature=0.9, top_p=0.8, seed=6)
    assert [o.response_ids for o in a] == [o.response_ids for o in b]  # batching does not change a rollout
    assert [o.response_ids for o in a] != [o.response_ids for o in c]
    for p, o in zip(PROMPTS, a):
        ref = full_logprobs(model, p + o.response_ids)
        for t, tok in enumerate(o.response_ids):
            row = ref[len(p) - 1 + t]
            assert abs(o.logprobs[t] - float(row[tok])) < 1e-5
            # sampling distribution: temperature 0.9 then nucleus 0.8, renormalised; the token was in the nucleus
            q = torch.softmax(row * (1 / 0.9), dim=-1)  # log-softmax(logits)/T == logits/T + const
            keep = top_p_mask(q[None], 0.8)[0]
            assert bool(keep[tok])
            assert abs(o.sampling_logprobs[t] - float(torch.log(q[tok] / q[keep].sum()))) < 1e-4


def test_top_p_keeps_the_smallest_nucleus():
    probs = torch.tensor([[0.1, 0.5, 0.3, 0.1]])
    assert top_p_mask(probs, 0.5).tolist() == [[False, True, False, False]]
    assert top_p_mask(probs, 0.6).tolist() == [[False, True, True, False]]  # 0.5 < 0.6: the 0.3 is needed
    assert top_p_mask(probs, 0.8).tolist() == [[False, True, True, False]]  # 0.5 + 0.3 reaches 0.8
    assert top_p_mask(probs, 0.81).tolist() == [[True, True, True, False]]  # a 0.1 tie: lower id first
    assert top_p_mask(probs, 1.0).tolist() == [[True, True, True, True]]


def test_top_p_tiny_samples_only_the_argmax(model):
    outs = generate(model, PROMPTS, max_new_tokens=6, temperature=1.0, top_p=1e-6, seed=3)
    greedy = generate(model, PROMPTS, max_new_tokens=6, temperature=0.0)
    assert [o.response_ids for o in outs] == [o.response_ids for o in greedy]
    assert all(abs(x) < 1e-6 for o in outs for x in o.sampling_logprobs)


def test_stop_sequences_and_eos_end_a_row(model):
    free = generate(model, PROMPTS, max_new_tokens=12, temperature=0.0)
    assert len({tuple(o.response_ids) for o in free}) > 1  # the fixture model does not emit one constant string
    stop_seq = free[1].response_ids[2:4]  # a 2-token stop sequence taken from prompt 1's greedy output
    outs = generate(model, PROMPTS, max_new_tokens=12, temperature=0.0, stop=[stop_seq])
    for o, f in zip(outs, free):  # each row ends right after the first occurrence of the stop sequence
        hits = [t for t in range(2, 13) if f.response_ids[t - 2:t] == stop_seq]
        if hits:
            assert (o.finish_reason, o.response_ids, o.stop_len) == ("stop", f.response_ids[:hits[0]], 2)
            assert o.text_ids() == f.response_ids[:hits[0] - 2]
        else:
            assert (o.finish_reason, o.response_ids, o.stop_len) == ("length", f.response_ids, 0)
    eos = free[3].response_ids[1]
    outs = generate(model, PROMPTS, max_new_tokens=12, temperature=0.0, eos_id=eos)
    for o, f in zip(outs, free):
        if eos in f.response_ids:
            k = f.response_ids.index(eos)
            assert (o.finish_reason, o.response_ids, o.stop_len) == ("eos", f.response_ids[:k + 1], 1)
            assert o.logprobs == pytest.approx(f.logprobs[:k + 1], abs=1e-6)
        else:
            assert o.finish_reason == "length"


def test_bad_arguments_are_refused(model):
    with pytest.raises(ConfigError, match="top_p"):
        generate(model, PROMPTS, max_new_tokens=4, top_p=0.0)
    with pytest.raises(ConfigError, match="prompt 1 is empty"):
        generate(model, [[1], []], max_new_tokens=4)
    with pytest.raises(ConfigError, match="stop sequences"):
        generate(model, PROMPTS, max_new_tokens=4, stop=[[]])


def test_response_logprobs_equal_the_generators(model):
    from training.rollout.score import response_logprobs

    outs = generate(model, PROMPTS, max_new_tokens=8, temperature=1.0, seed=2)
    scored = response_logprobs(model, [(o.prompt_ids, o.response_ids) for o in outs], micro_batch=3)
    for o, s in zip(outs, scored):
        assert s.shape == (8,) and max(abs(a - b) for a, b in zip(o.logprobs, s.tolist())) < 1e-5


def test_sdpa_core_attention_gives_the_same_rollouts(model, tmp_path):
    """load_policy's default model (fused SDPA core attention) against the stock megatron attention."""
    from dataclasses import asdict

    from training import checkpoint as ckpt
    from training.chat import ByteTokenizer
    from training.rollout import load_policy

    shape = get_shape("tiny", vocab_size=64)
    ckpt.save(tmp_path / "c", model=model, manifest={
        "run": "t", "model_shape": asdict(shape), "rotary_base": 10_000, "kernels": "local",
        "config": {"tokenizer": "bytes"}, "data": {"seq_length": 64}},
        tokenizer=(ByteTokenizer().describe(), None))
    policy = load_policy(tmp_path / "c", max_length=64)
    assert type(policy.model.decoder.layers[0].self_attention.core_attention).__name__ == "SDPACoreAttention"
    for kw in ({"temperature": 0.0}, {"temperature": 1.0, "top_p": 0.9, "seed": 4}):
        a = generate(model, PROMPTS, max_new_tokens=10, **kw)
        b = generate(policy.model, PROMPTS, max_new_tokens=10, **kw)
        assert [o.response_ids for o in a] == [o.response_ids for o in b]
        assert max(abs(x - y) for oa, ob in zip(a, b) for x, y in zip(oa.logprobs, ob.logprobs)) < 1e-5


def test_models_whose_attention_ignores_masks_are_refused_for_ragged_prompts(model):
    class TEDotProductAttention(torch.nn.Module):  # named like Transformer Engine's; only the name is read
        pass

    model.add_module("te_probe", TEDotProductAttention())
    try:
        with pytest.raises(ConfigError, match="ignores the explicit padding mask"):
            generate(model, PROMPTS, max_new_tokens=2)
        same = generate(model, [[1, 2, 3], [4, 5, 6]], max_new_tokens=2, temperature=0.0)  # no padding needed
        assert [len(o.response_ids) for o in same] == [2, 2]
    finally:
        del model.te_probe
