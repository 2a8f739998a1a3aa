"""Versioned prompt templates (our own wording). A generated row records `gen_template_id` and
`gen_template_version`; changing a template's text means bumping its version, so old rows stay
traceable to the words that made them."""

from __future__ import annotations

from dataclasses import dataclass

from synth.backends import ChatRequest, SamplingParams


@dataclass(frozen=True)
class PromptTemplate:
    id: str
    version: str  # "v1"
    user: str  # str.format fields, e.g. "{question}"
    system: str = ""

    def messages(self, **fields) -> tuple[dict, ...]:
        try:
            user = self.user.format(**fields)
        except KeyError as exc:
            raise ValueError(f"template {self.id} {self.version} needs field {exc}; got {sorted(fields)}") from None
        out = [{"role": "system", "content": self.system}] if self.system else []
        return tuple(out + [{"role": "user", "content": user}])

    def request(self, params: SamplingParams, **fields) -> ChatRequest:
        return ChatRequest(messages=self.messages(**fields), params=params,
                           template_id=self.id, template_version=self.version)
