"""Run configuration of `cidermill train mdloo CONFIG`: the post-training config (model, tokenizer, prompt
files as `data.sources`, optimizer, `steps` = MDLOO iterations, `init_from` = the SFT checkpoint) plus an
`mdloo:` section read onto `MDLOOConfig`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from manifests.errors import ConfigError

from .config import _build, read_yaml
from .mdloo import KL_ESTIMATORS, RATIOS, TRUST_KLS
from .post_config import PostTrainConfig, from_dict


@dataclass(frozen=True, kw_only=True)
class MDLOOConfig:
    prompts_per_iteration: int = 8
    responses_per_prompt: int = 4  # n; the leave-one-out baseline needs n >= 2
    inner_steps: int = 4  # optimizer steps per iteration on the iteration's samples (mirror descent)
    kl_coef: float = 0.05  # β: reward KL penalty against the frozen reference
    kl_estimator: str = "k1"  # k1 | k3 (training.mdloo)
    trust_region: float = 0.1  # γ: KL(π_θ ‖ π_θk) weight of the inner problem
    trust_kl: str = "sampled"  # sampled | full
    ratio: str = "token"  # token | sequence
    staleness_correction: bool = True  # truncated importance weight min(1, π_θk/μ) for stale rollouts
    max_staleness: int = 1  # rollouts for iteration k come from the policy of iteration >= k - max_staleness
    max_new_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ("<|end|>",)  # besides the chat format's own end marker (training.chat.chat_format)
    reference: str | None = None  # frozen reference checkpoint; default: init_from
    eval_prompts: int = 64  # held-out prompts answered greedily before and after
    plot: str | None = None  # PNG of reward and KL per iteration; default <out_dir>/reward-curve.png

    def __post_init__(self):
        if self.responses_per_prompt < 2:
            raise ConfigError(f"mdloo.responses_per_prompt must be >= 2 (leave-one-out); got {self.responses_per_prompt}")
        if self.prompts_per_iteration < 1 or self.inner_steps < 1 or self.max_new_tokens < 1:
            raise ConfigError("mdloo.prompts_per_iteration, inner_steps and max_new_tokens must be >= 1")
        if self.kl_coef < 0 or self.trust_region < 0:
            raise ConfigError("mdloo.kl_coef and mdloo.trust_region must be >= 0")
        if self.max_staleness < 0:
            raise ConfigError(f"mdloo.max_staleness must be >= 0; got {self.max_staleness}")
        for name, value, allowed in (("kl_estimator", self.kl_estimator, KL_ESTIMATORS),
                                     ("trust_kl", self.trust_kl, TRUST_KLS), ("ratio", self.ratio, RATIOS)):
            if value not in allowed:
                raise ConfigError(f"mdloo.{name} must be one of {allowed}; got {value!r}")
        if not 0 < self.top_p <= 1 or self.temperature < 0:
            raise ConfigError("mdloo.top_p must be in (0, 1] and temperature >= 0")


@dataclass(frozen=True, kw_only=True)
class MDLOORun:
    post: PostTrainConfig
    mdloo: MDLOOConfig

    @property
    def name(self) -> str:
        return self.post.name

    def to_dict(self) -> dict:
        return {**self.post.to_dict(), "mdloo": dataclasses.asdict(self.mdloo)}


def from_raw(raw: dict, *, where: str = "config") -> MDLOORun:
    raw = dict(raw)
    section = dict(raw.pop("mdloo", None) or {})
    if "stop" in section:
        section["stop"] = tuple(str(s) for s in section["stop"])
    raw.setdefault("method", "mdloo")
    if raw["method"] != "mdloo":
        raise ConfigError(f"{where}: method is {raw['method']!r}; `train mdloo` needs method: mdloo")
    post = from_dict(raw, where=where)
    if not (post.init_from or section.get("reference")):
        raise ConfigError(f"{where}: mdloo needs init_from (the SFT checkpoint) or mdloo.reference")
    return MDLOORun(post=post, mdloo=_build(MDLOOConfig, section, f"{where}: mdloo"))


def load_config(path: str | Path, **overrides) -> MDLOORun:
    return from_raw(read_yaml(path, overrides), where=str(path))
