"""Any OpenAI-compatible chat server (`vllm serve`, llama.cpp's server, TGI, ...).

    backend = OpenAIServerBackend(base_url="http://127.0.0.1:8000/v1", model="my-model",
                                  concurrency=16, max_retries=4, timeout_s=120, requests_per_second=20,
                                  deadline_s=300)

Requests go out on `concurrency` threads through one pooled HTTP client. A request is retried,
with exponential back-off and jitter, on connection errors, timeouts, 429 and 5xx (a server's
`Retry-After` is honoured, capped by `max_backoff_s`); other 4xx fail at once. A token bucket keeps
the whole backend under `requests_per_second`. `timeout_s` bounds each attempt (a server that accepts the
connection and never answers fails the attempt after it); `deadline_s` bounds a whole request, retries and
back-off included (default: none, i.e. up to (max_retries + 1) x timeout_s plus back-off). A request that
still fails comes back as an error on its own response, never as an exception for the batch. Each answer is
handed back (and cached) as soon as it arrives.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Sequence

from manifests.config import require_number
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
                 backoff_s: float = 0.5, max_backoff_s: float = 30.0, split_n: bool = False,
                 deadline_s: float | None = None, cache=None):
        where = "the openai backend"
        require_number(concurrency, "concurrency", where=where, ge=1, integer=True)
        require_number(max_retries, "max_retries", where=where, ge=0, integer=True)
        require_number(timeout_s, "timeout_s", where=where, gt=0)
        if deadline_s is not None:  # the whole request, retries and back-off included
            require_number(deadline_s, "deadline_s", where=where, gt=0)
        if requests_per_second is not None:
            require_number(requests_per_second, "requests_per_second", where=where, gt=0)
        if not base_url:
            raise ConfigError("the openai backend needs base_url (e.g. http://127.0.0.1:8000/v1)")
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
        self.timeout_s, self.deadline_s = timeout_s, deadline_s
        self.limiter = RateLimiter(requests_per_second, burst=concurrency)
        self._rng = random.Random(0)
        self.stats = {"requests": 0, "retries": 0, "failures": 0}
        self._stats_lock = threading.Lock()

    def close(self) -> None:
        self.client.close()

    def describe(self) -> dict:
        return {**super().describe(), "url": self.url}

    def _complete(self, requests: Sequence[ChatRequest]) -> list[list[Completion] | Exception]:
        out: list = [None] * len(requests)
        for i, res in self._complete_iter(requests):
            out[i] = res
        return out

    def _complete_iter(self, requests: Sequence[ChatRequest]):
        """Each request's result as soon as it is in (the base class caches it then)."""
        pool = ThreadPoolExecutor(max_workers=self.concurrency)
        try:
            futures = {pool.submit(self._one_safe, r): i for i, r in enumerate(requests)}
            for fut in as_completed(futures):
                yield futures[fut], fut.result()
        finally:  # a kill (KeyboardInterrupt) or an error: do not start what is still queued
            pool.shutdown(wait=False, cancel_futures=True)

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
        end = None if self.deadline_s is None else time.monotonic() + self.deadline_s
        for attempt in range(self.max_retries + 1):
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise RequestFailed(f"deadline of {self.deadline_s:g} s passed after {attempt} attempt(s); last: {last}")
            if attempt:
                with self._stats_lock:
                    self.stats["retries"] += 1
            self.limiter.acquire()
            retry_after = None
            try:
                with self._stats_lock:
                    self.stats["requests"] += 1
                resp = self.client.post(self.url, json=body,
                                        timeout=self.timeout_s if left is None else min(self.timeout_s, left))
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
                if end is not None:
                    delay = max(0.0, min(delay, end - time.monotonic()))
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
