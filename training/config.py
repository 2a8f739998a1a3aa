"""Training run configuration: YAML files map one to one onto these frozen dataclasses.

Each component owns its part (`OptimConfig` in optim/, `ParallelConfig` in parallel.py, `ModelShape` in
model/); this file only assembles them and checks what spans components. Everything is validated before
any work starts; errors name the key and the fix.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from manifests.config import build_config, require_number
from manifests.overrides import apply_overrides
from manifests.overrides import read_yaml as read_config_file
from manifests.errors import ConfigError
from manifests.mixture import PRETRAIN_STAGES

from .model.shapes import ModelShape, get_shape
from .optim.builder import OptimConfig
from .parallel import ParallelConfig

STAGES = PRETRAIN_STAGES  # one list of stage kinds, in manifests/mixture.py


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    mixture: str | None = None  # mixture manifest: catalog reference or path to its JSON
    blend: tuple[tuple[float, str], ...] = ()  # or hand-made (weight, prefix) pairs
    vocab_size: int | None = None  # for hand-made blends (a mixture manifest carries these)
    eod_id: int | None = None
    root: str | None = None  # data root (catalog) for `mixture` references
    valid_samples: int = 64
    # the held-out documents, split off every component before sampling (held-out text is never trained on):
    # one of a fraction of each component's documents, a number of documents, or a number of tokens in all
    # (the last two become the same fraction of every component, from the .idx headers)
    valid_fraction: float | None = None  # default 0.05 when neither of the next two is set
    valid_documents: int | None = None
    valid_tokens: int | None = None
    cache_dir: str | None = None  # megatron's index cache; default <run dir>/data-cache

    def __post_init__(self):
        if bool(self.mixture) == bool(self.blend):
            raise ConfigError("data: give exactly one of `mixture` (a mixture manifest) or `blend` "
                              "([[weight, prefix], ...])")
        chosen = [k for k in ("valid_fraction", "valid_documents", "valid_tokens") if getattr(self, k) is not None]
        if len(chosen) > 1:
            raise ConfigError(f"data: give at most one of valid_fraction, valid_documents, valid_tokens; got {chosen}")
        if self.valid_fraction is not None and not 0 < self.valid_fraction < 1:
            raise ConfigError(f"data.valid_fraction must be in (0, 1); got {self.valid_fraction}")
        for k in ("valid_documents", "valid_tokens"):
            if getattr(self, k) is not None and getattr(self, k) <= 0:
                raise ConfigError(f"data.{k} must be > 0; got {getattr(self, k)}")
        if self.blend and (self.vocab_size is None or self.eod_id is None):
            raise ConfigError("data.blend needs data.vocab_size and data.eod_id (the tokenizer's facts)")
        require_number(self.valid_samples, "data.valid_samples", ge=1, integer=True)


@dataclass(frozen=True, kw_only=True)
class DistillConfig:
    teacher: str | None = None  # checkpoint directory of the teacher (online top-1)
    teacher_top1: str | None = None  # or precomputed top-1 ids (prefix written by `distill.precompute_top1`)
    teacher_weight: float = 0.9  # weight of the teacher's top-1 label in the target
    teacher_shape: str | None = None  # for `train plan` before the teacher checkpoint exists (else its manifest)

    def __post_init__(self):
        if bool(self.teacher) == bool(self.teacher_top1):
            raise ConfigError("distill: give exactly one of `teacher` (checkpoint) or `teacher_top1` (precomputed)")
        if not 0 <= self.teacher_weight <= 1:
            raise ConfigError(f"distill.teacher_weight must be in [0, 1]; got {self.teacher_weight}")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    name: str
    stage: str = "core"
    model: ModelShape
    data: DataConfig
    optim: OptimConfig = field(default_factory=OptimConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    distill: DistillConfig | None = None
    seq_length: int | None = None  # None: the mixture manifest's; a hand-made blend needs it
    rotary_base: int = 500_000
    global_batch: int = 8  # sequences per optimizer step, over all data-parallel ranks
    micro_batch: int = 8  # sequences per forward pass on one rank
    steps: int | None = None  # None: the mixture's token budget / (global_batch * seq_length)
    seed: int = 1234  # model init; the data order uses the mixture's seed (this one for hand-made blends)
    init_from: str | None = None  # previous stage's checkpoint: weights only, fresh optimizer and schedule
    out_dir: str = "out/train"
    save_every: int = 0  # 0: only at the end
    eval_every: int = 0  # 0: only at the end
    log_every: int = 10

    def __post_init__(self):
        if self.stage not in STAGES:
            raise ConfigError(f"stage must be one of {STAGES}; got {self.stage!r} in {self.name}")
        check_run_numbers(self)
        if self.data.blend and (self.seq_length is None or self.steps is None):
            raise ConfigError(f"{self.name}: a hand-made data.blend needs seq_length and steps in the config")
        if self.micro_batch <= 0 or self.global_batch % self.micro_batch:
            raise ConfigError(f"{self.name}: global_batch ({self.global_batch}) must be a multiple of "
                              f"micro_batch ({self.micro_batch})")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def check_run_numbers(cfg, *, min_steps: int = 1) -> None:
    """The numbers every training config shares (TrainConfig, PostTrainConfig): a batch of 0, a RoPE base of
    0 or a negative step count is refused before any work, naming the key (they used to run to nonsense).
    `min_steps` 0: a recipe whose work before the first step is a result (an RM's probed head)."""
    where = cfg.name
    for key in ("global_batch", "micro_batch", "rotary_base"):
        require_number(getattr(cfg, key), key, where=where, ge=1, integer=True)
    for key, least in (("steps", min_steps), ("seq_length", 1)):
        if getattr(cfg, key) is not None:
            require_number(getattr(cfg, key), key, where=where, ge=least, integer=True)
    for key in ("save_every", "eval_every", "log_every"):
        if hasattr(cfg, key):
            require_number(getattr(cfg, key), key, where=where, ge=0, integer=True)
    if not cfg.out_dir:
        raise ConfigError(f"out_dir in {where}: give a folder for the checkpoints")


def _build(cls, raw: dict, where: str):
    """Every training config section goes through the one config library (did-you-mean, type checks)."""
    return build_config(cls, raw, where=where)


def from_dict(raw: dict, *, where: str = "config") -> TrainConfig:
    raw = dict(raw)
    model = raw.pop("model", None)
    if not isinstance(model, dict) or "shape" not in model:
        raise ConfigError(f"{where}: `model: {{shape: NAME, ...overrides}}` is required")
    model = dict(model)
    shape = get_shape(model.pop("shape"), **model)
    data = dict(raw.pop("data", {}) or {})
    if "blend" in data:
        data["blend"] = tuple((float(w), str(p)) for w, p in data["blend"])
    parts = {
        "model": shape,
        "data": _build(DataConfig, data, f"{where}: data"),
        "optim": _build(OptimConfig, dict(raw.pop("optim", {}) or {}), f"{where}: optim"),
        "parallel": _build(ParallelConfig, dict(raw.pop("parallel", {}) or {}), f"{where}: parallel"),
    }
    if raw.get("distill"):
        parts["distill"] = _build(DistillConfig, dict(raw.pop("distill")), f"{where}: distill")
    raw.pop("distill", None)
    return _build(TrainConfig, {**raw, **parts}, where)


def read_yaml(path: str | Path, overrides: dict) -> dict:
    """A YAML run config as a dict; `overrides` that are not None replace keys: top-level (`out_dir`, `steps`)
    or dotted (`optim.lr`, from `--set optim.lr=1e-3`), before validation, so they are checked like the YAML."""
    raw = read_config_file(path, what="run config")
    return apply_overrides(raw, {k: v for k, v in overrides.items() if v is not None}, where=str(path))


def load_config(path: str | Path, **overrides) -> TrainConfig:
    """Read a YAML run config; `overrides` replace keys (e.g. out_dir, steps, or dotted `optim.lr`)."""
    return from_dict(read_yaml(path, overrides), where=str(path))


def with_(cfg: TrainConfig, **changes) -> TrainConfig:
    return dataclasses.replace(cfg, **changes)
