"""Run configuration of the post-training recipes (`train sft | rm | dpo`): YAML onto frozen dataclasses.

Data are explicit files (JSON list, JSONL, optionally .gz) with a weight each; the run's data id is the
SHA-256 of their bytes, the weights and the template, and is what checkpoints and the reference-log-prob
cache are keyed on.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from manifests.config import require_number
from manifests.errors import ConfigError

from .chat import TemplateConfig
from .config import _build, check_run_numbers, read_yaml  # one key check, one YAML reader, one numbers check
from .model.shapes import ModelShape, get_shape
from .optim.builder import OptimConfig
from .parallel import ParallelConfig

METHODS = ("sft", "rm", "dpo", "mdloo")  # mdloo: its own section, training/mdloo_config.py


@dataclass(frozen=True, kw_only=True)
class SourceConfig:
    path: str | None = None  # a .json / .jsonl file (optionally .gz)
    # or a dataset version in the catalog under data.root: `name`, `name@id` or an id prefix. SFT: its
    # conversations are tokenized once into a published `<name>.sft-<tokenizer>` version (training/sft_data.py);
    # RM / DPO: its rows are pair records (`format` as for files)
    dataset: str | None = None
    weight: float = 1.0  # share of this source's records drawn per epoch (> 1 repeats them)
    format: str = "auto"  # sft: auto; pairs: llamafactory | hh_rlhf | alpaca_eval | auto
    max_records: int | None = None  # first N records only (after reading, before the held-out split)

    def __post_init__(self):
        if (self.path is None) == (self.dataset is None):
            raise ConfigError(f"data source {self.path or self.dataset}: give exactly one of `path` (a file) or "
                              "`dataset` (a catalog dataset version)")
        require_number(self.weight, "weight", where=f"data source {self.path or self.dataset}", gt=0)
        if self.max_records is not None:
            require_number(self.max_records, "max_records", where=f"data source {self.path or self.dataset}", ge=1,
                           integer=True)

    @property
    def label(self) -> str:
        return self.path or f"dataset {self.dataset}"


@dataclass(frozen=True, kw_only=True)
class PostDataConfig:
    sources: tuple[SourceConfig, ...]
    valid_fraction: float = 0.1  # of each source's records, held out before weighting
    seed: int = 1234  # shuffling and the held-out split
    root: str | None = None  # data root (catalog) for `dataset` sources

    def __post_init__(self):
        if not self.sources:
            raise ConfigError("data.sources: give at least one {path, weight} or {dataset, weight}")
        if any(s.dataset for s in self.sources) and not self.root:
            raise ConfigError("data.root: `dataset` sources are catalog references; set data.root (the data root)")
        if not 0 < self.valid_fraction < 1:
            raise ConfigError(f"data.valid_fraction must be in (0, 1); got {self.valid_fraction}")


@dataclass(frozen=True, kw_only=True)
class DPOConfig:
    loss: str = "dpo"  # dpo | ipo
    beta: float = 0.1  # dpo: inverse temperature; ipo: the regulariser tau (target margin 1/(2 tau))
    reference: str | None = None  # reference checkpoint; default: init_from
    cache_dir: str | None = None  # reference log-prob cache; default <out_dir>/../ref-logp-cache

    def __post_init__(self):
        if self.loss not in ("dpo", "ipo"):
            raise ConfigError(f"dpo.loss must be 'dpo' or 'ipo'; got {self.loss!r}")
        require_number(self.beta, "dpo.beta", gt=0)


@dataclass(frozen=True, kw_only=True)
class RMConfig:
    # target P(chosen > rejected) per preference level: significantly, better, slightly, negligibly better
    level_probs: tuple[float, ...] = (0.95, 0.85, 0.75, 0.65)
    # alpaca_eval: strength |2·(preference - 1.5)| >= threshold k -> level k (first match), else the last level
    strength_thresholds: tuple[float, ...] = (0.9, 0.6, 0.3)
    binary_level: int = 1  # level of pairs from binary sources (hh_rlhf, llamafactory): "better"
    grading_weight: float = 0.1  # lambda on the grading heads' cross-entropy
    grading_heads: tuple[tuple[str, int], ...] = ()  # (property, number of grade classes)
    head_hidden: int = 0  # grading MLP width; 0 = the model's hidden size
    # where the scalar and grading heads read the final hidden state: "last" = the last non-pad token (the
    # issue's default); "mean" = the mean over the response's tokens (steadier for small models)
    pooling: str = "last"
    # the heads' learning rate is optim.peak_lr x head_lr_mult (same schedule). The scalar head starts at zero
    # and an Adam step moves each weight by about the lr: at a rate fit for a pretrained body (1e-5..5e-4) the
    # head barely leaves zero in a short run, so a released base needs a larger rate for its new head
    head_lr_mult: float = 1.0
    # how the scalar head starts: "zeros" (every pair at σ = 0.5), or "probe": fitted on the frozen body's pooled
    # states of the training pairs before any step (linear probing, then fine-tuning: LP-FT, Kumar et al. 2022),
    # its L2 weight chosen from `probe_l2` by `probe_folds`-fold cross-validation on those pairs
    head_init: str = "zeros"
    probe_l2: tuple[float, ...] = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0, 10.0)
    probe_folds: int = 5

    def __post_init__(self):
        require_number(self.head_lr_mult, "rm.head_lr_mult", gt=0)
        if self.head_init not in ("zeros", "probe"):
            raise ConfigError(f"rm.head_init must be 'zeros' or 'probe'; got {self.head_init!r}")
        if not self.probe_l2 or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in self.probe_l2):
            raise ConfigError(f"rm.probe_l2 must be a non-empty list of positive numbers; got {self.probe_l2!r}")
        if not isinstance(self.probe_folds, int) or self.probe_folds < 2:
            raise ConfigError(f"rm.probe_folds must be an integer >= 2; got {self.probe_folds!r}")
        if self.pooling not in ("last", "mean"):
            raise ConfigError(f"rm.pooling must be 'last' or 'mean'; got {self.pooling!r}")
        if not all(0.5 <= p <= 1 for p in self.level_probs):
            raise ConfigError(f"rm.level_probs must lie in [0.5, 1]; got {self.level_probs}")
        if len(self.strength_thresholds) != len(self.level_probs) - 1:
            raise ConfigError("rm.strength_thresholds needs one threshold fewer than rm.level_probs")
        if self.grading_weight < 0:
            raise ConfigError("rm.grading_weight must be >= 0")


@dataclass(frozen=True, kw_only=True)
class PostTrainConfig:
    name: str
    method: str
    model: ModelShape
    data: PostDataConfig
    # 'bytes' or a tokenizer file; `checkpoint` in YAML = the tokenizer init_from carries (resolved on load)
    tokenizer: str = "bytes"
    template: TemplateConfig = field(default_factory=TemplateConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    dpo: DPOConfig | None = None
    rm: RMConfig | None = None
    seq_length: int = 256
    rotary_base: int = 500_000
    global_batch: int = 8
    micro_batch: int = 8
    steps: int = 20
    seed: int = 1234
    init_from: str | None = None  # SFT: a pretrained checkpoint; RM/DPO: the SFT checkpoint
    # SFT only: train a task adapter (LoRA only) on the frozen base named by this adapter's manifest (the
    # palettized model), starting from a copy of this adapter (the accuracy-recovery adapter)
    adapter_init: str | None = None
    # 0: train every parameter; N: only the last N transformer layers, the final norm and an untied output
    # layer (and the RM's heads); the embedding and the layers below stay frozen and get no backward pass:
    # how a released model is post-trained on a CPU budget (benchmarks/real_*.py)
    trainable_layers: int = 0
    out_dir: str = "out/post"
    save_every: int = 0
    log_every: int = 10
    valid_max: int = 64  # held-out conversations / pairs evaluated

    def __post_init__(self):
        if self.method not in METHODS:
            raise ConfigError(f"{self.name}: method must be one of {METHODS}; got {self.method!r}")
        if self.micro_batch <= 0 or self.global_batch % self.micro_batch:
            raise ConfigError(f"{self.name}: global_batch ({self.global_batch}) must be a multiple of "
                              f"micro_batch ({self.micro_batch})")
        # an RM whose head is probed is a model at step 0 already: `steps: 0` keeps the probe alone
        check_run_numbers(self, min_steps=0 if self.rm and self.rm.head_init == "probe" else 1)
        require_number(self.seq_length, "seq_length", where=self.name, ge=2)
        require_number(self.valid_max, "valid_max", where=self.name, ge=1, integer=True)
        require_number(self.trainable_layers, "trainable_layers", where=self.name, ge=0, integer=True)
        if self.trainable_layers > self.model.num_layers:
            raise ConfigError(f"{self.name}: trainable_layers must be in [0, {self.model.num_layers}] (0 = all); "
                              f"got {self.trainable_layers}")
        if self.adapter_init and (self.method != "sft" or self.init_from):
            raise ConfigError(f"{self.name}: adapter_init is for sft only, and replaces init_from (the base is the "
                              f"one the adapter names); got method {self.method}, init_from {self.init_from}")
        if self.method == "dpo" and not (self.init_from or (self.dpo and self.dpo.reference)):
            raise ConfigError(f"{self.name}: dpo needs init_from (the SFT checkpoint) or dpo.reference")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _from_checkpoint(raw: dict, where: str, key: str):
    """The checkpoint `model: {shape: checkpoint}` / `tokenizer: checkpoint` read from: init_from, else the
    DPO or MDLOO reference."""
    from .checkpoint import open_checkpoint

    source = raw.get("init_from") or (raw.get("dpo") or {}).get("reference") or \
        (raw.get("mdloo") or {}).get("reference")
    if not source:
        raise ConfigError(f"{where}: `{key}: checkpoint` takes it from init_from (or dpo/mdloo reference); "
                          "none is set")
    return open_checkpoint(source)


def from_dict(raw: dict, *, where: str = "config") -> PostTrainConfig:
    raw = dict(raw)
    model = dict(raw.pop("model", None) or {})
    if "shape" not in model:
        raise ConfigError(f"{where}: `model: {{shape: NAME, ...overrides}}` is required")
    if model["shape"] == "checkpoint":  # an imported (or any) checkpoint's shape and RoPE base, as recorded
        info = _from_checkpoint(raw, where, "model.shape")
        recorded = dict(info.manifest["model_shape"])
        model = {**recorded, **{k: v for k, v in model.items() if k != "shape"}, "shape": recorded.pop("name")}
        model.pop("name")
        base = info.manifest.get("rotary_base", 500_000)
        base = int(base) if float(base).is_integer() else base
        if raw.setdefault("rotary_base", base) != base:
            raise ConfigError(f"{where}: rotary_base {raw['rotary_base']} differs from {info.directory}'s {base}")
    if raw.get("tokenizer") == "checkpoint":
        from .export_hf import tokenizer_spec

        raw["tokenizer"] = tokenizer_spec(_from_checkpoint(raw, where, "tokenizer"))
    shape = get_shape(model.pop("shape"), **model)
    data = dict(raw.pop("data", None) or {})
    data["sources"] = tuple(_build(SourceConfig, dict(s), f"{where}: data.sources[{i}]")
                            for i, s in enumerate(data.get("sources") or []))
    parts = {"model": shape, "data": _build(PostDataConfig, data, f"{where}: data")}
    template = dict(raw.pop("template", None) or {})
    if "loss_on" in template:
        template["loss_on"] = tuple(template["loss_on"])
    parts["template"] = _build(TemplateConfig, template, f"{where}: template")
    parts["optim"] = _build(OptimConfig, dict(raw.pop("optim", None) or {}), f"{where}: optim")
    parts["parallel"] = _build(ParallelConfig, dict(raw.pop("parallel", None) or {}), f"{where}: parallel")
    if raw.get("dpo") is not None or raw.get("method") == "dpo":
        parts["dpo"] = _build(DPOConfig, dict(raw.pop("dpo", None) or {}), f"{where}: dpo")
    if raw.get("rm") is not None or raw.get("method") == "rm":
        rm = dict(raw.pop("rm", None) or {})
        if isinstance(rm.get("probe_l2"), list):
            rm["probe_l2"] = tuple(rm["probe_l2"])
        for key in ("level_probs", "strength_thresholds"):
            if key in rm:
                rm[key] = tuple(float(x) for x in rm[key])
        if "grading_heads" in rm:
            rm["grading_heads"] = tuple((str(n), int(k)) for n, k in rm["grading_heads"])
        parts["rm"] = _build(RMConfig, rm, f"{where}: rm")
    raw.pop("dpo", None)
    raw.pop("rm", None)
    if raw.get("method") == "mdloo":
        raw.pop("mdloo", None)  # its section is read by training.mdloo_config
    return _build(PostTrainConfig, {**raw, **parts}, where)


def load_config(path: str | Path, **overrides) -> PostTrainConfig:
    return from_dict(read_yaml(path, overrides), where=str(path))
