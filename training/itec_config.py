"""iTeC configuration (training/itec.py): typed, validated before any work, one dataclass per part.

    name: tiny-itec
    root: data/root                       # catalog root: one dataset version per round, `itec-<name>`
    out_dir: out/post/tiny-itec           # caches and the members trained between rounds
    prompts:                              # training/prompt_sets.py readers
      - {kind: gsm8k, path: data/samples/gsm8k/train_short64.jsonl, limit: 16}
      - {kind: preference, path: data/samples/preference/llamafactory/dpo_en_demo.json.gz, limit: 8}
      - {kind: instructions, path: data/samples/preference/hh_rlhf/harmless-base_test.jsonl.gz, limit: 8}
      - {kind: glaive, path: data/samples/glaive/glaive_toolcall_en_demo.json, limit: 8}
    committee:                            # the starting members; `reference` is the first one
      - {name: sft, checkpoint: out/post/tiny-sft}
      - {name: dpo, checkpoint: out/post/tiny-dpo}
    samples_per_member: 2
    generation: {max_new_tokens: 64, temperature: 0.8, top_p: 0.95, seed: 0, max_prompt_tokens: 512}
    rewards: {rm_checkpoint: out/post/tiny-rm, weights: {chat: {rm: 1.0}, math: {math: 1.0, rm: 0.1}}}
    selection: {min_margin: 0.0}
    rounds: 2
    refresh:                              # after each round but the last: members trained on its data
      - {method: sft, steps: 20}          # rejection-sampling SFT on the best responses
      - {method: dpo, steps: 20, loss: ipo, beta: 0.5}   # on best/worst pairs
    train: {seq_length: 384, micro_batch: 8, global_batch: 8, peak_lr: 0.01}
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from .config import ConfigError, _build, read_yaml
from .rewards.combine import RewardConfig, reward_config

PROMPT_KINDS = ("gsm8k", "preference", "instructions", "glaive", "code")
TYPE_OF_KIND = {"gsm8k": "math", "preference": "chat", "instructions": "instruction", "glaive": "tool", "code": "code"}


@dataclass(frozen=True, kw_only=True)
class PromptSource:
    kind: str
    path: str
    limit: int | None = None
    skip: int = 0  # records skipped first (e.g. the ones an SFT member was trained on)
    format: str = "auto"  # preference / instructions: the pair format (training.prefs)

    def __post_init__(self):
        if self.kind not in PROMPT_KINDS:
            raise ConfigError(f"prompts: kind must be one of {PROMPT_KINDS}; got {self.kind!r}")
        if self.limit is not None and self.limit <= 0:
            raise ConfigError(f"prompts ({self.path}): limit must be > 0; got {self.limit}")


@dataclass(frozen=True, kw_only=True)
class Member:
    name: str
    checkpoint: str


@dataclass(frozen=True, kw_only=True)
class GenerationConfig:
    max_new_tokens: int = 64
    temperature: float = 0.8
    top_p: float = 0.95
    seed: int = 0
    max_prompt_tokens: int = 512  # longer prompts are skipped (counted)
    max_batch_size: int = 32
    backend: str = "megatron"  # megatron (training/rollout, CPU and GPU) | vllm (GPU: the HF export in vLLM)

    def __post_init__(self):
        if self.backend not in ("megatron", "vllm"):
            raise ConfigError(f"generation.backend must be megatron or vllm; got {self.backend!r}")
        if self.max_new_tokens <= 0 or self.max_prompt_tokens <= 0:
            raise ConfigError("generation: max_new_tokens and max_prompt_tokens must be > 0")
        if self.temperature <= 0:
            raise ConfigError(f"generation.temperature must be > 0 (iTeC samples); got {self.temperature}")


@dataclass(frozen=True, kw_only=True)
class SelectionConfig:
    min_margin: float = 0.0  # a best/worst pair needs reward(best) - reward(worst) > min_margin
    min_best_reward: float | None = None  # a prompt's best response enters the RS data only at or above this


@dataclass(frozen=True, kw_only=True)
class RefreshStep:
    method: str  # sft | dpo
    steps: int = 20
    loss: str = "dpo"  # dpo | ipo (method dpo)
    beta: float = 0.1

    def __post_init__(self):
        if self.method not in ("sft", "dpo"):
            raise ConfigError(f"refresh: method must be sft or dpo; got {self.method!r}")
        if self.steps <= 0:
            raise ConfigError(f"refresh ({self.method}): steps must be > 0")


@dataclass(frozen=True, kw_only=True)
class TrainSettings:
    seq_length: int = 384
    micro_batch: int = 8
    global_batch: int = 8
    peak_lr: float = 0.01
    valid_fraction: float = 0.1
    seed: int = 1234


@dataclass(frozen=True, kw_only=True)
class ITeCConfig:
    name: str
    root: str
    out_dir: str
    prompts: tuple[PromptSource, ...]
    committee: tuple[Member, ...]
    samples_per_member: int = 2
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    rewards: RewardConfig = field(default_factory=RewardConfig)
    selection: SelectionConfig = field(default_factory=SelectionConfig)
    rounds: int = 1
    refresh: tuple[RefreshStep, ...] = ()
    train: TrainSettings = field(default_factory=TrainSettings)

    def __post_init__(self):
        if not self.prompts:
            raise ConfigError(f"{self.name}: prompts: give at least one prompt source")
        if not self.committee:
            raise ConfigError(f"{self.name}: committee: give at least one {{name, checkpoint}}")
        names = [m.name for m in self.committee]
        if len(set(names)) != len(names):
            raise ConfigError(f"{self.name}: committee member names must be distinct; got {names}")
        if self.samples_per_member <= 0 or self.rounds <= 0:
            raise ConfigError(f"{self.name}: samples_per_member and rounds must be > 0")
        if self.samples_per_member * len(self.committee) < 2:
            raise ConfigError(f"{self.name}: best/worst pairs need >= 2 responses per prompt; "
                              "raise samples_per_member or add a member")
        missing = sorted({TYPE_OF_KIND[p.kind] for p in self.prompts} - set(self.rewards.weights))
        if missing:
            raise ConfigError(f"{self.name}: rewards.weights has no entry for prompt type(s) {missing}; add e.g. "
                              f"`{missing[0]}: {{rm: 1.0}}`")
        if self.rounds > 1 and not self.refresh:
            raise ConfigError(f"{self.name}: rounds > 1 needs `refresh` steps (what trains the next member)")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def from_dict(raw: dict, *, where: str = "itec config") -> ITeCConfig:
    raw = dict(raw)
    parts = {
        "prompts": tuple(_build(PromptSource, dict(p), f"{where}: prompts[{i}]")
                         for i, p in enumerate(raw.pop("prompts", None) or [])),
        "committee": tuple(_build(Member, dict(m), f"{where}: committee[{i}]")
                           for i, m in enumerate(raw.pop("committee", None) or [])),
        "generation": _build(GenerationConfig, dict(raw.pop("generation", None) or {}), f"{where}: generation"),
        "rewards": reward_config(raw.pop("rewards", None)),
        "selection": _build(SelectionConfig, dict(raw.pop("selection", None) or {}), f"{where}: selection"),
        "refresh": tuple(_build(RefreshStep, dict(s), f"{where}: refresh[{i}]")
                         for i, s in enumerate(raw.pop("refresh", None) or [])),
        "train": _build(TrainSettings, dict(raw.pop("train", None) or {}), f"{where}: train"),
    }
    return _build(ITeCConfig, {**raw, **parts}, where)


def load_config(path: str | Path, **overrides) -> ITeCConfig:
    return from_dict(read_yaml(path, overrides), where=str(path))
