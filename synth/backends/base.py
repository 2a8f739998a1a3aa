"""The LLM backend interface: a batch of chat requests in, completions (with log-probs) out.

Every backend (CPU transformers, vLLM offline, an OpenAI-compatible server, a scripted fake for
tests) implements one method, `_complete(requests) -> list[list[Completion]]`. The base class adds
the response cache (by request hash, so a rerun or a resumed run does not regenerate) and stamps
each response with its provenance (backend, model, prompt template id/version, sampling, seed).

How to call it::

    from synth.backends import ChatRequest, SamplingParams, load_backend

    backend = load_backend("cpu", cache_path="data/root/_cache/llm.sqlite")  # or "openai", "vllm", "scripted"
    params = SamplingParams(max_tokens=64, temperature=0.7, seed=1, n=2)
    requests = [
        ChatRequest.user("Write a haiku about parsers.", params=params,
                         template_id="haiku", template_version="v1"),
    ]
    for response in backend.generate(requests):
        for completion in response.completions:        # n of them
            print(completion.text, completion.finish_reason, completion.mean_logprob)
        row_columns = response.provenance()            # dict to store beside each generated row

`generate` returns responses in request order; a request that failed after retries comes back with
`error` set and no completions (it is not cached), so one bad request never sinks the batch.
`provenance_columns(responses)` turns a list of responses into Arrow columns (`gen_*`).
"""

from __future__ import annotations

import hashlib
import json
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Iterator, Sequence

import pyarrow as pa

from manifests.config import require

from .cache import ResponseCache

ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True, kw_only=True)
class SamplingParams:
    """Sampling settings; part of the cache key, so two settings never share a cached answer."""

    max_tokens: int = 256
    temperature: float = 0.7       # 0 = greedy
    top_p: float = 1.0
    n: int = 1                     # completions per request
    seed: int = 0                  # the backend's sampling seed (same seed + same request = same text)
    stop: tuple[str, ...] = ()     # cut each completion at the first of these strings
    logprobs: bool = False         # return per-token log-probabilities where the backend gives them

    def __post_init__(self) -> None:
        require(self.max_tokens > 0, f"max_tokens must be > 0; got {self.max_tokens} in SamplingParams")
        require(self.temperature >= 0, f"temperature must be >= 0; got {self.temperature} in SamplingParams")
        require(0 < self.top_p <= 1, f"top_p must be in (0, 1]; got {self.top_p} in SamplingParams")
        require(self.n >= 1, f"n must be >= 1; got {self.n} in SamplingParams")
        object.__setattr__(self, "stop", tuple(self.stop))

    def to_dict(self) -> dict:
        out = asdict(self)
        out["stop"] = list(self.stop)
        return out


@dataclass(frozen=True, kw_only=True)
class ChatRequest:
    """One chat conversation to complete. `messages` are ({"role", "content"}, ...) in order.

    `template_id`/`template_version` name the prompt template that built the messages; they are
    recorded with every row (and are not part of the cache key: the messages already are).
    """

    messages: tuple[dict, ...]
    params: SamplingParams = field(default_factory=SamplingParams)
    template_id: str = ""
    template_version: str = ""

    def __post_init__(self) -> None:
        msgs = tuple({"role": str(m["role"]), "content": str(m["content"])} for m in self.messages)
        require(len(msgs) > 0, "a ChatRequest needs at least one message")
        for m in msgs:
            require(m["role"] in ROLES, f"message role must be one of {ROLES}; got {m['role']!r}")
        object.__setattr__(self, "messages", msgs)

    @classmethod
    def user(cls, content: str, *, system: str | None = None, **kw: Any) -> "ChatRequest":
        msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": content}]
        return cls(messages=tuple(msgs), **kw)

    def key(self, *, backend: str, model: str) -> str:
        """sha256 of canonical JSON of everything that determines the answer."""
        payload = {"backend": backend, "model": model, "messages": list(self.messages),
                   "params": self.params.to_dict()}
        text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Completion:
    text: str
    finish_reason: str = "stop"                      # "stop" | "length"
    n_prompt_tokens: int | None = None
    n_completion_tokens: int | None = None
    token_logprobs: list[float] | None = None        # one per generated token, when asked for

    @property
    def mean_logprob(self) -> float | None:
        if not self.token_logprobs:
            return None
        return sum(self.token_logprobs) / len(self.token_logprobs)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Completion":
        return cls(**d)


@dataclass
class ChatResponse:
    request: ChatRequest
    backend: str
    model: str
    completions: list[Completion] = field(default_factory=list)
    cached: bool = False
    seconds: float = 0.0
    error: str | None = None

    @property
    def text(self) -> str:
        """The first completion's text ('' when the request failed)."""
        return self.completions[0].text if self.completions else ""

    def provenance(self) -> dict:
        p = self.request.params
        return {
            "gen_backend": self.backend,
            "gen_model": self.model,
            "gen_template_id": self.request.template_id,
            "gen_template_version": self.request.template_version,
            "gen_sampling": json.dumps(p.to_dict(), sort_keys=True),
            "gen_seed": p.seed,
        }


PROVENANCE_SCHEMA = pa.schema([
    ("gen_backend", pa.string()), ("gen_model", pa.string()), ("gen_template_id", pa.string()),
    ("gen_template_version", pa.string()), ("gen_sampling", pa.string()), ("gen_seed", pa.int64()),
])


def provenance_columns(responses: Sequence[ChatResponse]) -> dict[str, pa.Array]:
    """Columns to append to a table with one row per response (same order)."""
    rows = [r.provenance() for r in responses]
    return {f.name: pa.array([r[f.name] for r in rows], f.type) for f in PROVENANCE_SCHEMA}


class Backend(ABC):
    """Subclasses set `name`, `self.model` and implement `_complete`."""

    name: ClassVar[str]

    def __init__(self, *, model: str, cache: ResponseCache | str | None = None):
        self.model = model
        self.cache = ResponseCache(cache) if isinstance(cache, str) else cache

    @abstractmethod
    def _complete(self, requests: Sequence[ChatRequest]) -> list[list[Completion] | Exception]:
        """Complete every request (n completions each), in order. Return an Exception in place of
        a request's completions when that one request failed for good (after retries)."""

    def _complete_iter(self, requests: Sequence[ChatRequest]) -> Iterator[tuple[int, list[Completion] | Exception]]:
        """(index, result) pairs as results become available, in any order. The default completes the whole
        batch first (offline engines finish together); a backend that answers requests one by one (a
        server) yields each as it arrives, so `generate` caches it at once."""
        results = self._complete(requests)
        if len(results) != len(requests):
            raise RuntimeError(f"{self.name}: returned {len(results)} results for {len(requests)} requests")
        yield from enumerate(results)

    def describe(self) -> dict:
        return {"backend": self.name, "model": self.model}

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        """Cached batch completion; see the module docstring."""
        keys = [r.key(backend=self.name, model=self.model) for r in requests]
        out: list[ChatResponse | None] = [None] * len(requests)
        hits = self.cache.get_many(keys) if self.cache is not None else {}
        misses = []
        for i, (req, key) in enumerate(zip(requests, keys)):
            if key in hits:
                out[i] = ChatResponse(req, self.name, self.model, [Completion.from_dict(c) for c in hits[key]],
                                      cached=True)
            else:
                misses.append(i)
        # Identical requests in one batch are generated once.
        unique: dict[str, int] = {}
        for i in misses:
            unique.setdefault(keys[i], i)
        todo = list(unique.values())
        if todo:
            start = time.perf_counter()
            fresh: dict[str, ChatResponse] = {}
            # each answer is cached as soon as it arrives: a run killed mid-batch keeps (and does not pay for
            # again) every answer it had received
            for j, res in self._complete_iter([requests[i] for i in todo]):
                i = todo[j]
                if isinstance(res, Exception):
                    fresh[keys[i]] = ChatResponse(requests[i], self.name, self.model, [],
                                                  error=f"{type(res).__name__}: {res}")
                else:
                    fresh[keys[i]] = ChatResponse(requests[i], self.name, self.model, list(res))
                    if self.cache is not None:
                        self.cache.put_many({keys[i]: [c.to_dict() for c in res]}, backend=self.name,
                                            model=self.model)
            if len(fresh) != len(todo):
                raise RuntimeError(f"{self.name}: returned {len(fresh)} results for {len(todo)} requests")
            per = (time.perf_counter() - start) / len(todo)
            for i in misses:
                src = fresh[keys[i]]
                out[i] = ChatResponse(requests[i], self.name, self.model, list(src.completions),
                                      seconds=per, error=src.error)
        return out  # type: ignore[return-value]

    def close(self) -> None:
        """Free resources (servers, models); the default has none."""


def apply_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Cut `text` at the earliest stop string; return (text, was_cut)."""
    cut = min((text.find(s) for s in stop if s and s in text), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)
