"""Issue 45, class 5: synthesis loses no paid-for work and publishes nothing as something. A dead backend
publishes no version and fails (exit 1), a server that never answers is bounded, a damaged response cache
is one line, and a kill mid-batch keeps every answer already received. Each test failed before the issue."""

from __future__ import annotations

import signal
import time

import pyarrow as pa
import pytest

from manifests import Catalog
from manifests.errors import ManifestError
from synth.backends import ChatRequest, ResponseCache, SamplingParams, load_backend

from .fake_openai import FakeServer

pytest.importorskip("httpx", reason="the openai backend needs httpx (requirements/synth.txt)")
DEAD = "http://127.0.0.1:9/v1"  # the discard port: nothing listens, every connection is refused


def reqs(k):
    p = SamplingParams(max_tokens=8)
    return [ChatRequest.user(f"q{i}", params=p, template_id="t", template_version="v1") for i in range(k)]


def test_a_dead_backend_publishes_no_version_and_fails(tmp_path):
    from corpus.executors import NothingKept
    from synth.generation.llm import register_backend
    from synth.generation.runner import run_generator
    from synth.stages.math_augment import MathAugment

    register_backend("dead", load_backend("openai", base_url=DEAD, model="m", max_retries=0))
    seeds = pa.table({"id": ["s1", "s2"], "source": ["gsm8k:1", "gsm8k:2"],
                      "question": ["Tom has 3 apples and buys 4 more. How many?", "What is 2 + 5?"],
                      "answer": ["7", "7"]})
    stage = MathAugment({"kinds": ["rephrase"], "backend": {"kind": "registered", "name": "dead"}, "max_tokens": 8})
    # before: a published 0-row version `synth-math` and a normal return (exit 0)
    with pytest.raises(NothingKept, match="synth-math: kept no rows of 2 seed rows, so no version was published; "
                                          "the dropped rows are in synth-math.rejects@"):
        run_generator(str(tmp_path), "synth-math", seeds, [stage])
    names = set(Catalog(str(tmp_path)).names())
    assert "synth-math" not in names and "synth-math.rejects" in names


def test_synth_coding_with_a_dead_backend_exits_1(tmp_path, capsys):
    from manifests.main import main

    code = main(["synth", "coding", "--backend", "openai", "--base-url", DEAD, "--model", "m", "--topics", "1",
                 "--questions-per-topic", "1", "--max-retries", "0", "--root", str(tmp_path)])
    assert code == 1 and "kept no rows" in capsys.readouterr().err
    assert "synth_coding_triplets" not in Catalog(str(tmp_path)).names()


def test_a_server_that_never_answers_is_bounded_by_the_deadline():
    with FakeServer(plan=["slow"] * 8, slow_s=2.0) as server:
        b = load_backend("openai", base_url=server.base_url, model="fake", concurrency=1, max_retries=8,
                         timeout_s=0.3, deadline_s=1.0, backoff_s=0.01)
        start = time.monotonic()
        [r] = b.generate(reqs(1))
        took = time.monotonic() - start
        b.close()
    # before: no deadline (and no command-line option): 5 attempts x 120 s held the request for 10 minutes
    assert r.error is not None and "deadline of 1 s passed" in r.error and took < 4.0  # slack for a loaded CPU


def test_a_damaged_cache_is_one_clear_line(tmp_path):
    path = tmp_path / "llm.sqlite"
    path.write_bytes(b"this is not an sqlite database " * 200)
    # before: sqlite3.DatabaseError: file is not a database (a traceback)
    with pytest.raises(ManifestError, match=f"response cache {path} cannot be used .file is not a database"):
        load_backend("scripted", reply=lambda req, i: "x", cache_path=str(path))


@pytest.fixture
def python_sigint():
    """The kill below is `_thread.interrupt_main`, which does nothing unless Python's own handler is on
    SIGINT; an earlier test in the same process (or a library it loaded) may have left another one there."""
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield before
    signal.signal(signal.SIGINT, before)


def test_a_kill_mid_batch_keeps_the_answers_already_received(tmp_path, python_sigint):
    cache = str(tmp_path / "llm.sqlite")

    def two_answers_in(timeout_s: float = 10.0) -> None:  # the kill comes after the client had both answers
        end = time.monotonic() + timeout_s
        while time.monotonic() < end and len(ResponseCache(cache)) < 2:
            time.sleep(0.05)

    with FakeServer(plan=["ok", "ok", "kill"], slow_s=0.5, before_kill=two_answers_in) as server:
        b = load_backend("openai", base_url=server.base_url, model="fake", concurrency=1, cache_path=cache)
        with pytest.raises(KeyboardInterrupt):
            b.generate(reqs(5))
            pytest.fail(f"no KeyboardInterrupt; SIGINT's handler before this test: {python_sigint!r}")
        b.close()
    # before: the cache was written once, after the whole batch: the two answers were lost (and paid again)
    assert len(ResponseCache(cache)) == 2
    with FakeServer() as server:
        b = load_backend("openai", base_url=server.base_url, model="fake", concurrency=1, cache_path=cache)
        out = b.generate(reqs(5))
        b.close()
    assert [r.cached for r in out] == [True, True, False, False, False] and len(server.bodies) == 3
