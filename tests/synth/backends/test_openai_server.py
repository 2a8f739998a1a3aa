"""The OpenAI-compatible backend against a scripted local server: retries, back-off, timeouts,
rate limits, concurrency, per-request failure, log-probs and the cache."""

from __future__ import annotations

import time

import pytest

from synth.backends import ChatRequest, SamplingParams, load_backend

from .fake_openai import FakeServer

pytest.importorskip("httpx", reason="the openai backend needs httpx (requirements/synth.txt)")


def reqs(k, **params):
    p = SamplingParams(max_tokens=8, **params)
    return [ChatRequest.user(f"q{i}", params=p, template_id="t", template_version="v1") for i in range(k)]


def backend(server, **kw):
    opts = {"base_url": server.base_url, "model": "fake", "backoff_s": 0.01, "max_backoff_s": 0.1, **kw}
    return load_backend("openai", **opts)


def test_batch_with_n_and_logprobs_in_order():
    with FakeServer() as server:
        b = backend(server, concurrency=4)
        out = b.generate(reqs(6, n=2, logprobs=True, seed=3))
        b.close()
    assert [r.completions[1].text for r in out] == [f"echo[1] q{i}" for i in range(6)]
    assert out[0].completions[0].token_logprobs == [-0.5, -1.5] and out[0].completions[0].mean_logprob == -1.0
    assert {(body["n"], body["seed"], body["logprobs"]) for body in server.bodies} == {(2, 3, True)}
    assert out[0].provenance()["gen_backend"] == "openai-server"


def test_retries_transient_errors_then_succeeds():
    with FakeServer(plan=["503", "429", "503"]) as server:
        b = backend(server, concurrency=1, max_retries=4)
        [r] = b.generate(reqs(1))
        b.close()
    assert r.error is None and r.text == "echo[0] q0"
    assert len(server.bodies) == 4 and b.stats["retries"] == 3


def test_gives_up_after_max_retries_and_fails_only_that_request():
    with FakeServer(plan=["503"] * 3) as server:
        b = backend(server, concurrency=1, max_retries=2)
        first, second = b.generate(reqs(2))
        b.close()
    assert first.completions == [] and "gave up after 3 attempts" in first.error and "HTTP 503" in first.error
    assert second.error is None and second.text == "echo[0] q1"


def test_client_errors_and_garbage_are_not_retried():
    with FakeServer(plan=["400", "garbage"]) as server:
        b = backend(server, concurrency=1, max_retries=3)
        bad, garbage = b.generate(reqs(2))
        b.close()
    assert "HTTP 400" in bad.error and "malformed response" in garbage.error
    assert len(server.bodies) == 2


def test_timeout_is_retried():
    with FakeServer(plan=["slow"], slow_s=1.0) as server:
        b = backend(server, concurrency=1, max_retries=1, timeout_s=0.3)
        [r] = b.generate(reqs(1))
        b.close()
    assert r.error is None and len(server.bodies) == 2 and b.stats["retries"] == 1


def test_rate_limit_spaces_requests():
    with FakeServer() as server:
        b = backend(server, concurrency=4, requests_per_second=20)
        start = time.monotonic()
        b.generate(reqs(12))
        elapsed = time.monotonic() - start
        b.close()
    # A burst of 4 (the bucket size), then 8 more at 20/s: at least ~0.4 s.
    assert elapsed >= 0.35 and len(server.bodies) == 12


def test_split_n_and_cache(tmp_path):
    with FakeServer() as server:
        b = backend(server, concurrency=2, split_n=True, cache_path=str(tmp_path / "c.sqlite"))
        first = b.generate(reqs(2, n=3, seed=10))
        again = b.generate(reqs(2, n=3, seed=10))
        b.close()
    assert sorted({body["seed"] for body in server.bodies}) == [10, 11, 12] and len(server.bodies) == 6
    assert [len(r.completions) for r in first] == [3, 3] and all(r.cached for r in again)
    assert [c.text for c in again[1].completions] == [c.text for c in first[1].completions]
