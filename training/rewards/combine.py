"""Rewards combined per prompt type: reward = Σ_c weight[type][c] · r_c over the components
rm (the reward model, squashed by σ so every component is in [0, 1]; `rm_transform: raw` keeps the logit),
math, instruction, tool and code (training/rewards/rules.py). A prompt type with a rule component gets that
check; every type may add the RM. The scorer opens the sandbox only when a code prompt is scored.

    rewards:
      rm_checkpoint: out/post/tiny-rm
      weights:
        chat: {rm: 1.0}
        math: {math: 1.0, rm: 0.1}
        instruction: {instruction: 1.0, rm: 0.2}
        tool: {tool: 1.0}
        code: {code: 1.0}
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from ..config import ConfigError
from ..prompt_sets import PROMPT_TYPES
from .rules import code_reward, instruction_reward, math_reward, tool_reward

COMPONENTS = ("rm", "math", "instruction", "tool", "code")
RULE_OF_TYPE = {"math": "math", "instruction": "instruction", "tool": "tool", "code": "code"}
DEFAULT_WEIGHTS = {"chat": {"rm": 1.0}, "math": {"math": 1.0, "rm": 0.1},
                   "instruction": {"instruction": 1.0, "rm": 0.2}, "tool": {"tool": 1.0}, "code": {"code": 1.0}}


@dataclass(frozen=True, kw_only=True)
class RewardConfig:
    weights: dict = field(default_factory=lambda: {k: dict(v) for k, v in DEFAULT_WEIGHTS.items()})
    rm_checkpoint: str | None = None
    rm_transform: str = "sigmoid"  # sigmoid | raw

    def __post_init__(self):
        for ptype, comps in self.weights.items():
            if ptype not in PROMPT_TYPES:
                raise ConfigError(f"rewards.weights: unknown prompt type {ptype!r}; known: {list(PROMPT_TYPES)}")
            for comp, w in comps.items():
                if comp not in COMPONENTS:
                    raise ConfigError(f"rewards.weights.{ptype}: unknown component {comp!r}; known: {list(COMPONENTS)}")
                if comp in RULE_OF_TYPE.values() and RULE_OF_TYPE.get(ptype) != comp:
                    raise ConfigError(f"rewards.weights.{ptype}: the {comp!r} rule needs {comp} prompts (their "
                                      f"reference); a {ptype} prompt has none")
                if not isinstance(w, (int, float)) or w < 0:
                    raise ConfigError(f"rewards.weights.{ptype}.{comp} must be a number >= 0; got {w!r}")
        if self.rm_transform not in ("sigmoid", "raw"):
            raise ConfigError(f"rewards.rm_transform must be sigmoid or raw; got {self.rm_transform!r}")

    def uses_rm(self, types: Sequence[str] | None = None) -> bool:
        return any(self.weights.get(t, {}).get("rm", 0) > 0 for t in (types or self.weights))


def reward_config(raw: dict | None) -> RewardConfig:
    raw = dict(raw or {})
    bad = set(raw) - {"weights", "rm_checkpoint", "rm_transform"}
    if bad:
        raise ConfigError(f"rewards: unknown keys {sorted(bad)}; known: weights, rm_checkpoint, rm_transform")
    if "weights" in raw:
        raw["weights"] = {str(k): {str(c): float(w) if isinstance(w, (int, float)) else w for c, w in v.items()}
                          for k, v in raw["weights"].items()}
    return RewardConfig(**raw)


class RewardScorer:
    """score(prompt rows, responses) -> [{"reward", "components", "detail"}]. `rm`: a RewardModelScorer (or
    anything with .score(items)); made from cfg.rm_checkpoint when needed and not given."""

    def __init__(self, cfg: RewardConfig, *, rm=None, sandbox=None):
        self.cfg, self._rm, self._sandbox, self._own_sandbox = cfg, rm, sandbox, False

    def rm(self):
        if self._rm is None:
            if not self.cfg.rm_checkpoint:
                raise ConfigError("rewards: a prompt type weights the reward model but rewards.rm_checkpoint is unset")
            from .model import RewardModelScorer

            self._rm = RewardModelScorer(self.cfg.rm_checkpoint)
        return self._rm

    def sandbox(self):
        if self._sandbox is None:
            from synth.sandbox import Sandbox  # raises ConfigError naming bubblewrap when no isolation works

            self._sandbox, self._own_sandbox = Sandbox(max_workers=1).__enter__(), True
        return self._sandbox

    def close(self):
        if self._own_sandbox:
            self._sandbox.__exit__(None, None, None)
            self._sandbox, self._own_sandbox = None, False

    def score(self, prompts: Sequence[dict], responses: Sequence[str]) -> list[dict]:
        if len(prompts) != len(responses):
            raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
        out = []
        for p in prompts:
            if p["type"] not in self.cfg.weights:
                raise ConfigError(f"prompt {p['id']}: type {p['type']!r} has no entry in rewards.weights")
        need_rm = [i for i, p in enumerate(prompts) if self.cfg.weights[p["type"]].get("rm", 0) > 0]
        rm_scores = dict(zip(need_rm, self.rm().score([(prompts[i]["messages"], responses[i]) for i in need_rm])
                             if need_rm else []))
        for i, (p, r) in enumerate(zip(prompts, responses)):
            w = self.cfg.weights[p["type"]]
            comps, detail = {}, {}
            if i in rm_scores:
                raw = rm_scores[i]
                comps["rm"] = 1 / (1 + math.exp(-raw)) if self.cfg.rm_transform == "sigmoid" else raw
                detail["rm_raw"] = raw
            rule = RULE_OF_TYPE.get(p["type"])
            if rule and w.get(rule, 0) > 0:
                s = self._rule(rule, p, r)
                comps[rule], detail[rule] = s.value, s.detail
            out.append({"reward": sum(w.get(c, 0.0) * v for c, v in comps.items()), "components": comps,
                        "detail": detail})
        return out

    def _rule(self, rule: str, p: dict, r: str):
        ref = p.get("reference") or {}
        if rule == "math":
            return math_reward(r, ref)
        if rule == "instruction":
            return instruction_reward(r, ref)
        if rule == "tool":
            return tool_reward(r, ref, p.get("tools"))
        return code_reward(r, ref, self.sandbox())
