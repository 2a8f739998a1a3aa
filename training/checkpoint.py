"""Checkpoints: weights, optimizer state, RNG and data position, plus a manifest written last.

Layout of one checkpoint directory:
    model.pt | model/        weights: a plain state dict on CPU; megatron-core distributed checkpoint on GPU
    optim/rank-00000.pt      this rank's optimizer state, RNG states: torch CPU and CUDA, megatron's CUDA RNG
                             tracker, Python and numpy (resume needs the same parallel layout)
    checkpoint.json          the manifest: written last and atomically, so its presence means complete

The manifest records what data (mixture manifest id or blend), what config, the step, tokens seen, the
data position (samples consumed in the blend's deterministic order) and the seed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from manifests.errors import ManifestError
from manifests.manifest import canonical_json

CHECKPOINT_MANIFEST = "checkpoint.json"
FORMAT_VERSION = 1


@dataclass
class CheckpointInfo:
    directory: Path
    manifest: dict

    @property
    def step(self) -> int:
        return int(self.manifest["step"])


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def _use_dist_checkpointing() -> bool:
    return torch.cuda.is_available()


def save(directory: str | Path, *, model, optimizer=None, manifest: dict,
         copy_files: dict[str, str | Path] | None = None) -> Path:
    """`copy_files` = {relative path in the checkpoint: source file}: files the checkpoint carries as they are
    (an import's tokenizer files; the manifest records their hashes)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if _rank() == 0:
        for rel, source in (copy_files or {}).items():
            (directory / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, directory / rel)
    if _use_dist_checkpointing():
        from megatron.core import dist_checkpointing

        (directory / "model").mkdir(exist_ok=True)
        dist_checkpointing.save(model.sharded_state_dict(), str(directory / "model"))
    elif _rank() == 0:
        torch.save(model.state_dict(), directory / "model.pt")
    if optimizer is not None:
        (directory / "optim").mkdir(exist_ok=True)
        state = {"optimizer": optimizer.state_dict(), "rng_cpu": torch.get_rng_state(),
                 "rng_cuda": torch.cuda.get_rng_state() if torch.cuda.is_available() else None,
                 "rng_tracker": _tracker_states(), "rng_python": random.getstate(),
                 "rng_numpy": np.random.get_state()}
        torch.save(state, directory / "optim" / f"rank-{_rank():05d}.pt")
    if dist.is_initialized():
        dist.barrier()
    if _rank() == 0:
        body = {"format_version": FORMAT_VERSION, "saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "weights": "dist_checkpointing" if _use_dist_checkpointing() else "state_dict", **manifest}
        tmp = directory / (CHECKPOINT_MANIFEST + ".tmp")
        with open(tmp, "w") as f:
            f.write(json.dumps(json.loads(canonical_json(body)), indent=2))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, directory / CHECKPOINT_MANIFEST)
    return directory


def open_checkpoint(directory: str | Path) -> CheckpointInfo:
    """A checkpoint directory, or a run directory (then its newest finished `step-*` checkpoint)."""
    directory = Path(directory)
    if not (directory / CHECKPOINT_MANIFEST).exists() and directory.is_dir():
        found = latest(directory)
        if found is not None:
            return found
    path = directory / CHECKPOINT_MANIFEST
    if not path.exists():
        raise ManifestError(f"{directory}: no {CHECKPOINT_MANIFEST}; not a finished checkpoint")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}: not valid JSON ({exc})") from None
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ManifestError(f"{path}: unknown checkpoint format_version {manifest.get('format_version')!r}")
    return CheckpointInfo(directory, manifest)


def load_weights(info: CheckpointInfo, model, *, strict: bool = True) -> None:
    if info.manifest["weights"] == "dist_checkpointing":
        from megatron.core import dist_checkpointing

        state = dist_checkpointing.load(model.sharded_state_dict(), str(info.directory / "model"))
        model.load_state_dict(state, strict=strict)
        return
    state = torch.load(info.directory / "model.pt", map_location="cpu", weights_only=True)
    load_state_dict_(model, state, strict=strict)


def load_state_dict_(model, state: dict, *, strict: bool = True) -> None:
    """Load a plain state dict, ignoring megatron's `_extra_state` entries (no tensors, TE bookkeeping)."""
    state = {k: v for k, v in state.items() if not k.endswith("_extra_state")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("_extra_state")]
    if strict and (missing or unexpected):
        raise ManifestError(f"checkpoint does not fit the model: missing {missing[:5]}, unexpected {unexpected[:5]}")


def load_training_state(info: CheckpointInfo, optimizer) -> None:
    path = info.directory / "optim" / f"rank-{_rank():05d}.pt"
    if not path.exists():
        raise ManifestError(f"{path} is missing: resume needs the same number of ranks as the saved run")
    state = torch.load(path, map_location="cpu", weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng_cpu"])
    if state.get("rng_cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["rng_cuda"])
    if state.get("rng_tracker"):
        from megatron.core import tensor_parallel

        tensor_parallel.get_cuda_rng_tracker().set_states(state["rng_tracker"])
    if "rng_python" in state:
        random.setstate(state["rng_python"])
        np.random.set_state(state["rng_numpy"])


def _tracker_states() -> dict:
    """megatron's CUDA RNG tracker (the per-tensor-parallel-rank generator forked around dropout and
    weight init); on the CPU it is the no-op tracker and holds nothing."""
    from megatron.core import tensor_parallel

    try:
        return {k: v.clone() if torch.is_tensor(v) else v
                for k, v in tensor_parallel.get_cuda_rng_tracker().get_states().items()}
    except AttributeError:  # the no-op tracker may keep no states at all
        return {}


def latest(run_dir: str | Path) -> CheckpointInfo | None:
    """The newest finished checkpoint under `run_dir` (directories `step-NNNNNNN`), or None."""
    run_dir = Path(run_dir)
    found = sorted(p for p in run_dir.glob("step-*") if (p / CHECKPOINT_MANIFEST).exists())
    return open_checkpoint(found[-1]) if found else None


def load_model(checkpoint_dir: str | Path, *, seq_length: int, rotary_base: int | None = None,
               parallel_output: bool = True, kernels: str | None = None):
    """Rebuild a model from a checkpoint's manifest (its shape and RoPE base) and load its weights."""
    from .model import build_model, get_shape

    info = open_checkpoint(checkpoint_dir)
    shape = get_shape(info.manifest["model_shape"]["name"], **{
        k: v for k, v in info.manifest["model_shape"].items() if k != "name"})
    model = build_model(shape, seq_length=seq_length,
                        rotary_base=rotary_base or info.manifest["rotary_base"], parallel_output=parallel_output,
                        kernels=kernels or info.manifest.get("kernels", "local"))
    load_weights(info, model)
    return model, info
