"""`cidermill synth coding` end to end against a local OpenAI-compatible fake server."""

from __future__ import annotations

import json

import pytest

from manifests.main import main
from manifests import Catalog

from .backends.fake_openai import FakeServer

pytest.importorskip("httpx", reason="the openai backend needs httpx (requirements/synth.txt)")


def reply(body, i):
    content = body["messages"][-1]["content"]
    if "interview question" in content:
        return "Given a string s, return it with the characters in reverse order; 'ab' gives 'ba'."
    if "assert statements" in content:
        return "```python\nassert reverse_string('ab') == 'ba'\nassert reverse_string('') == ''\n```"
    return ["```python\ndef reverse_string(s):\n    return s[::-1]\n```", "nope"][i % 2]


def test_synth_coding_cli_publishes_triplets(tmp_path, capsys):
    with FakeServer(reply=reply) as server:
        code = main(["synth", "coding", "--root", str(tmp_path), "--topics", "1", "--questions-per-topic", "1",
                     "--n-solutions", "2", "--backend", "openai", "--base-url", server.base_url, "--model", "fake"])
    assert code == 0
    out = capsys.readouterr().out
    summary = json.loads(out[: out.rindex("}") + 1])
    assert summary["triplets_kept"] == 1 and summary["test_pass_rate"] == 1.0
    v = Catalog(str(tmp_path)).resolve("synth_coding_triplets")
    [row] = v.read().to_pylist()
    assert row["solution"] == "def reverse_string(s):\n    return s[::-1]" and row["gen_backend"] == "openai-server"
    assert (tmp_path / "_cache" / "llm_responses.sqlite").is_file()
