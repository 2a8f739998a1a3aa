"""A scripted backend for tests and dry runs: a Python function answers each request.

    backend = ScriptedBackend(lambda req, i: f"answer {i} to {req.messages[-1]['content']}")

`reply(request, index)` is called once per completion (index 0..n-1); it may raise to simulate a
failed request. `calls` counts how many completions were really produced (cache hits do not count).
"""

from __future__ import annotations

from typing import Callable, Sequence

from .base import Backend, ChatRequest, Completion, apply_stop


class ScriptedBackend(Backend):
    name = "scripted"

    def __init__(self, reply: Callable[[ChatRequest, int], str], *, model: str = "scripted", cache=None):
        super().__init__(model=model, cache=cache)
        self.reply = reply
        self.calls = 0

    def _complete(self, requests: Sequence[ChatRequest]) -> list[list[Completion] | Exception]:
        out: list[list[Completion] | Exception] = []
        for req in requests:
            try:
                comps = []
                for i in range(req.params.n):
                    self.calls += 1
                    text, cut = apply_stop(self.reply(req, i), req.params.stop)
                    words = text.split()
                    if len(words) > req.params.max_tokens:   # a word stands in for a token here
                        text, reason = " ".join(words[: req.params.max_tokens]), "length"
                    else:
                        reason = "stop"
                    comps.append(Completion(text, reason, n_completion_tokens=min(len(words), req.params.max_tokens)))
                out.append(comps)
            except Exception as exc:  # one failed request must not sink the batch
                out.append(exc)
        return out
