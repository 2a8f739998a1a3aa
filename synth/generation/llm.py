"""How generators talk to the LLM backends of `synth.backends` (issue 7), and row provenance.

Stages name their backend with a small mapping in their config (`{kind: cpu}`, `{kind: openai,
base_url: ..., model: ...}`), resolved once per process by `get_backend`; the demo and tests hand
in an already-built backend with `register_backend(name, backend)` and `{kind: registered, name: ...}`.
Every generated row carries the `gen_*` provenance columns of `synth.backends.PROVENANCE_SCHEMA`;
rows made by a rule (reversion, distractors, parallel merges) say `gen_backend = rules`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from manifests.config import require

from synth.backends import PROVENANCE_SCHEMA, Backend, ChatResponse, SamplingParams, load_backend

from synth.generation.template import PromptTemplate

PROVENANCE_COLUMNS = [f.name for f in PROVENANCE_SCHEMA]


@dataclass(frozen=True, kw_only=True)
class LLMConfig:
    """The options every LLM-backed stage shares; a stage's config extends it and re-declares only the
    defaults it changes (`max_tokens: int = 80`). A subclass's `__post_init__` calls this one first."""

    backend: dict = field(default_factory=lambda: {"kind": "cpu"})  # see get_backend
    max_tokens: int = 128
    temperature: float = 0.0  # 0 = greedy
    seed: int = 0

    def __post_init__(self):
        require(self.max_tokens > 0, f"max_tokens must be > 0; got {self.max_tokens}")
        require(self.temperature >= 0, f"temperature must be >= 0; got {self.temperature}")

    def sampling(self, **changes) -> SamplingParams:
        """The SamplingParams these options give (`n`, `stop`, ... as keywords)."""
        return SamplingParams(max_tokens=self.max_tokens, temperature=self.temperature, seed=self.seed, **changes)

_BACKENDS: dict[str, Backend] = {}


def register_backend(name: str, backend: Backend) -> None:
    """Make a built backend available to stages as `{kind: registered, name: NAME}`."""
    _BACKENDS[name] = backend


def get_backend(spec: dict[str, Any]) -> Backend:
    spec = dict(spec)
    kind = spec.pop("kind", "cpu")
    if kind == "registered":
        name = spec.get("name", "")
        if name not in _BACKENDS:
            raise ValueError(f"no backend registered as {name!r}; call synth.generation.llm.register_backend first "
                             f"(registered: {sorted(_BACKENDS) or 'none'})")
        return _BACKENDS[name]
    key = json.dumps({"kind": kind, **spec}, sort_keys=True)
    if key not in _BACKENDS:
        _BACKENDS[key] = load_backend(kind, **spec)
    return _BACKENDS[key]


def generate(backend: Backend, template: PromptTemplate, items: list[dict], *,
             params: SamplingParams) -> list[ChatResponse]:
    """Render `template` per item and complete all of them as one batch (in order)."""
    if not items:
        return []
    return backend.generate([template.request(params, **it) for it in items])


def rule_provenance(rule: str, version: str = "v1", *, seed: int = 0) -> dict:
    """Provenance of a row made by code, not by a model."""
    return {"gen_backend": "rules", "gen_model": "none", "gen_template_id": rule,
            "gen_template_version": version, "gen_sampling": "{}", "gen_seed": int(seed)}
