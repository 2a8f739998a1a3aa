"""Any OpenAI-compatible chat server (`vllm serve`, llama.cpp's server, TGI, ...).

    backend = OpenAIServerBackend(base_url="http://127.0.0.1:8000/v1", model="my-model",
                                  concurrency=16, max_retries=4, timeout_s=120, requests_per_second=20)

Requests go out on `concurrency` threads through one pooled HTTP client. A request is retried,
with exponential back-off and jitter, on connection errors, timeouts, 429 and 5xx (a server's
`Retry-After` is honoured, capped by `max_backoff_s`); other 4xx fail at once. A token bucket keeps
the whole backend under `requests_per_second`. A request that still fails comes back as an error
on its own response, never as an exception for the batch.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from manifests.errors import ConfigError

from .base import Backend, ChatRequest, Completion, apply_stop

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class RequestFailed(Exception):
    pass


class RateLimiter:
    """Token bucket: at most `rate` acquisitions per second on average, bursts up to `burst`."""

    def __init__(self, rate: float | None, burst: int = 1):
        self.rate = rate
        self.capacity = max(1, burst)
        self.tokens = float(self.capacity)
        self.last = time.monotonic()
        self.lock = threading.Lock()

    def acquire(self) -> None:
        if not self.rate:
            return
        while True:
            with self.lock:
                now = time.monotonic()
                self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)
                self.last = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return
                wait = (1 - self.tokens) / self.rate
            time.sleep(wait)


class OpenAIServerBackend(Backend):
    name = "openai-server"

    def __init__(self, *, base_url: str, model: str, api_key: str | None = None, concurrency: int = 8,
                 max_retries: int = 4, timeout_s: float = 120.0, requests_per_second: float | None = None,
                 backoff_s: float = 0.5, max_backoff_s: float = 30.0, split_n: bool = False, cache=None):
        if concurrency < 1 or max_retries < 0 or timeout_s <= 0:
            raise ConfigError(f"openai backend: need concurrency >= 1, max_retries >= 0, timeout_s > 0; got "
                              f"{concurrency}, {max_retries}, {timeout_s}")
        super().__init__(model=model, cache=cache)
        import httpx   # only this backend needs it

        self.url = base_url.rstrip("/") + "/chat/completions"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(timeout=timeout_s, headers=headers,
                                   limits=httpx.Limits(max_connections=concurrency))
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.split_n = split_n   # for servers that ignore `n`: send n requests with seeds seed..seed+n-1
        self.limiter = RateLimiter(requests_per_second, burst=concurrency)
        self._rng = random.Random(0)
        self.stats = {"requests": 0, "retries": 0, "failures": 0}
        self._stats_lock = threading.Lock()

    def close(self) -> None:
        self.client.close()

    def describe(self) -> dict:
        return {**super().describe(), "url": self.url}

    def _complete(self, requests: Sequence[ChatRequest]) -> list[list[Completion] | Exception]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(self._one_safe, requests))

    def _one_safe(self, req: ChatRequest) -> list[Completion] | Exception:
        try:
            if self.split_n and req.params.n > 1:
                out = []
                for i in range(req.params.n):
                    out += self._post(req, n=1, seed=req.params.seed + i)
                return out
            return self._post(req, n=req.params.n, seed=req.params.seed)
        except Exception as exc:   # one request failing for good must not sink the batch
            with self._stats_lock:
                self.stats["failures"] += 1
            return exc

    def _payload(self, req: ChatRequest, *, n: int, seed: int) -> dict:
        p = req.params
        body = {"model": self.model, "messages": list(req.messages), "max_tokens": p.max_tokens,
                "temperature": p.temperature, "top_p": p.top_p, "n": n, "seed": seed}
        if p.stop:
            body["stop"] = list(p.stop)
        if p.logprobs:
            body["logprobs"] = True
        return body

    def _post(self, req: ChatRequest, *, n: int, seed: int) -> list[Completion]:
        import httpx

        body = self._payload(req, n=n, seed=seed)
        last = "no attempt"
        for attempt in range(self.max_retries + 1):
            if attempt:
                with self._stats_lock:
                    self.stats["retries"] += 1
            self.limiter.acquire()
            retry_after = None
            try:
                with self._stats_lock:
                    self.stats["requests"] += 1
                resp = self.client.post(self.url, json=body)
                if resp.status_code == 200:
                    return self._parse(resp.json(), req)
                last = f"HTTP {resp.status_code}: {resp.text[:200]}"
                if resp.status_code not in RETRY_STATUS:
                    raise RequestFailed(last)
                retry_after = _retry_after(resp.headers.get("retry-after"))
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            if attempt < self.max_retries:
                delay = retry_after if retry_after is not None else self.backoff_s * 2 ** attempt
                delay = min(self.max_backoff_s, delay) * (1 + 0.25 * self._rng.random())   # jitter
                time.sleep(delay)
        raise RequestFailed(f"gave up after {self.max_retries + 1} attempts; last: {last}")

    def _parse(self, data: dict, req: ChatRequest) -> list[Completion]:
        try:
            choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
            usage = data.get("usage") or {}
            out = []
            for ch in choices:
                text, cut = apply_stop(ch["message"].get("content") or "", req.params.stop)
                lp = ch.get("logprobs") or {}
                token_lps = [float(t["logprob"]) for t in (lp.get("content") or [])] or None
                out.append(Completion(text=text, finish_reason="stop" if cut else (ch.get("finish_reason") or "stop"),
                                      n_prompt_tokens=usage.get("prompt_tokens"),
                                      n_completion_tokens=(len(token_lps) if token_lps else
                                                           (usage.get("completion_tokens") if len(choices) == 1 else None)),
                                      token_logprobs=token_lps if req.params.logprobs else None))
            return out
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RequestFailed(f"malformed response ({type(exc).__name__}: {exc}): {str(data)[:200]}") from None


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
