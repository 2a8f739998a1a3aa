"""What the steps of benchmarks/gpu_check.py share: the context a step runs in, the report it fills, the
shapes and the byte-level demo data they train on.

A step is two functions: `setup(ctx, rep) -> state` does everything that needs no CUDA (imports every
GPU-path function the step will call, builds and validates its configs, does its arithmetic) and runs on
every machine, CPU CI included; `run(ctx, rep, state)` does the GPU work and runs only where CUDA is.
Both record into `rep`: checks (pass / fail / skipped with a reason), numbers and notes.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Shapes. Every one is the AFM architecture (training/model/gpt.py); sizes are overrides of afm-on-device, so
# a checkpoint's manifest names the shape they came from.
ON_DEVICE = "afm-on-device"
# checkpoints that save and resume in seconds: width 1024, 4 layers, the full 49k vocabulary (97M parameters)
SMALL = {"hidden_size": 1024, "num_layers": 4, "num_attention_heads": 8, "num_query_groups": 4, "head_dim": 128,
         "ffn_hidden_size": 2816}
# post-training on the byte tokenizer (vocabulary 256): the same width and depth
SMALL_BYTES = {**SMALL, "vocab_size": 256}
# rollout throughput: the on-device width, heads and vocabulary at 4 of its 26 layers (554M parameters), so
# the per-token work of generation is the real model's per layer
ROLLOUT = {"num_layers": 4}
# --dry (CPU): the same steps at the width of the `tiny` CPU shape, so the GPU steps' own code runs in CI in
# seconds; it proves wiring (imports, signatures, result fields), not speed or numerics at scale
TINY = {"hidden_size": 64, "num_layers": 2, "num_attention_heads": 4, "num_query_groups": 2, "head_dim": 16,
        "ffn_hidden_size": 128, "vocab_size": 256}


@dataclass
class Ctx:
    work: Path  # scratch shared by the steps of one run (mixtures, checkpoints, exports)
    cuda: bool
    gpu_name: str | None = None
    gpu_bytes: int | None = None
    te: bool = False  # transformer_engine importable
    vllm: bool = False  # vllm importable
    quick: bool = False  # fewer steps (for a rerun of failed steps in a short device window)
    dry: bool = False  # CPU dry run: the steps' GPU work at TINY shapes on the CPU (where a step allows it)

    def shape(self, overrides: dict) -> dict:
        """A model section over afm-on-device: `overrides`, or the tiny width in a dry run."""
        return {"shape": ON_DEVICE, **(TINY if self.dry else overrides)}

    @property
    def kernels(self) -> str:
        return "transformer_engine" if self.te else "local"

    @classmethod
    def detect(cls, work: Path, *, quick: bool = False, dry: bool = False) -> "Ctx":
        import importlib.util

        import torch

        cuda = torch.cuda.is_available()
        name = torch.cuda.get_device_name(0) if cuda else None
        total = torch.cuda.get_device_properties(0).total_memory if cuda else None
        return cls(work=Path(work), cuda=cuda, gpu_name=name, gpu_bytes=total,
                   te=importlib.util.find_spec("transformer_engine") is not None,
                   vllm=importlib.util.find_spec("vllm") is not None, quick=quick, dry=dry)


@dataclass
class Report:
    checks: list[dict] = field(default_factory=list)
    numbers: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.checks.append({"name": name, "status": "pass" if ok else "fail", "detail": detail})
        say(f"  {'PASS' if ok else 'FAIL'} {name}" + (f": {detail}" if detail else ""))
        return ok

    def skip(self, name: str, reason: str) -> None:
        self.checks.append({"name": name, "status": "skipped", "detail": reason})
        say(f"  SKIP {name}: {reason}")

    def number(self, key: str, value) -> None:
        self.numbers[key] = value

    def note(self, text: str) -> None:
        self.notes.append(text)
        say(f"  note: {text}")

    def to_dict(self) -> dict:
        return {"checks": self.checks, "numbers": self.numbers, "notes": self.notes}


def say(*parts) -> None:
    print(*parts, flush=True)


def quiet(*_args, **_kwargs) -> None:
    pass


def byte_mixture(ctx: Ctx, *, seq_length: int, sequences: int) -> tuple[str, str]:
    """(mixture name, data root): the bundled C4 sample (300 real documents, 0.74 MB) as UTF-8 byte tokens,
    published as a mixture manifest over Megatron .bin/.idx files at `seq_length` (training.byte_mixture, what
    `cidermill train tiny-mixtures` makes). Published once per sequence length and run."""
    from manifests.catalog import Catalog
    from training.byte_mixture import bundled_c4_texts, publish_byte_mixture

    root = ctx.work / "root"
    name = f"gpu-check-c4-{seq_length}"
    root.mkdir(parents=True, exist_ok=True)
    if name not in Catalog(str(root)).names():
        texts = sorted(bundled_c4_texts(REPO), key=len)
        half = len(texts) // 2
        publish_byte_mixture(root, name=name, stage="core", seq_length=seq_length,
                             token_budget=seq_length * sequences,
                             components={"web-short": (0.5, texts[:half]), "web-long": (0.5, texts[half:])})
    return name, str(root)


def pretrain_raw(ctx: Ctx, *, name: str, mixture: str, root: str, steps: int, global_batch: int, micro_batch: int,
                 model: dict, deterministic: bool = False) -> dict:
    """A pretraining run config: configs/train/afm-on-device-core.yaml (its optimizer and parallel layout:
    bf16, distributed optimizer, selective recompute) on the byte mixture, without its teacher and init."""
    from training.config import read_yaml

    raw = read_yaml(REPO / "configs/train/afm-on-device-core.yaml", {})
    raw.pop("distill", None)
    raw.pop("seq_length", None)  # the mixture's
    raw.update(name=name, init_from=None, model=model, steps=steps, global_batch=global_batch,
               micro_batch=micro_batch, out_dir=str(ctx.work / "runs" / name), save_every=0, eval_every=0,
               log_every=5, data={"mixture": mixture, "root": root, "valid_samples": 4})
    raw["optim"] = dict(raw["optim"], warmup_steps=max(1, steps // 6))
    raw["parallel"] = dict(raw["parallel"], kernels=ctx.kernels, deterministic=deterministic)
    return raw


def post_raw(ctx: Ctx, method: str, *, name: str, steps: int, **changes) -> dict:
    """A post-training config: configs/train/post/afm-on-device-<method>.yaml (its parallel layout: bf16,
    distributed optimizer, selective recompute; its optimizer; its rm/dpo sections) with the data, tokenizer
    and sequence length of configs/train/post/tiny-<method>.yaml (files that ship with the repository), at the
    small shape on bytes, with the kernels this machine has."""
    from training.config import read_yaml

    raw = read_yaml(REPO / f"configs/train/post/afm-on-device-{method}.yaml", {})
    tiny = read_yaml(REPO / f"configs/train/post/tiny-{method}.yaml", {})
    data = dict(tiny["data"])
    data["sources"] = [dict(s, path=str(REPO / s["path"]), max_records=60 if ctx.dry else s.get("max_records", 400))
                       for s in data["sources"]]
    raw.update(name=name, steps=steps, model=ctx.shape(SMALL_BYTES), tokenizer=tiny["tokenizer"], data=data,
               seq_length=tiny["seq_length"], global_batch=8, micro_batch=2, init_from=None,
               out_dir=str(ctx.work / "runs" / name), log_every=max(1, steps // 3), save_every=0,
               valid_max=8 if ctx.dry else 32)
    raw["parallel"] = dict(raw["parallel"], kernels=ctx.kernels)
    raw["optim"] = dict(raw["optim"], warmup_steps=1)
    raw.update(changes)
    return raw


def finite(xs) -> bool:
    import math

    return bool(xs) and all(math.isfinite(float(x)) for x in xs)


def write_json(path: Path, body: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, indent=2, default=str))
    os.replace(tmp, path)


class Timer:
    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
