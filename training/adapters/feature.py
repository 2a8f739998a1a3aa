"""Feature (task) adapters initialised from the accuracy-recovery adapter (AFM report 5.2): the base named in
the recovery adapter's manifest (a palettized model, or a plain checkpoint) is loaded and frozen, a copy of
the recovery adapter is attached, and only that copy's LoRA parameters train.

`cidermill train sft CONFIG --adapter-init RECOVERY` builds its model here; the SFT loop, loss and data are
the usual ones. The recovery adapter on disk is never changed; the trained task adapter is saved as an
adapter-only checkpoint (`<out_dir>/adapter`) whose manifest names the same base, rank and targets.
"""

from __future__ import annotations

from pathlib import Path

import torch

from manifests.errors import ConfigError, ManifestError

from .lora import Adapter, AdapterHost, copy_adapter
from .store import base_id, load_adapter, save_adapter


class AdaptedModel(torch.nn.Module):
    """The frozen base with an attached adapter; the adapter's A/B are this module's only trainable
    parameters (so the trainer's optimizer, clipping and checkpoints see exactly them)."""

    def __init__(self, base, adapter: Adapter, host: AdapterHost):
        super().__init__()
        self.base = base
        self.lora_A = adapter.A
        self.lora_B = adapter.B
        self.adapter = adapter
        self.host = host
        self.config = getattr(base, "config", None)
        self.vocab_size = getattr(base, "vocab_size", None)

    def forward(self, *args, **kwargs):
        return self.base(*args, **kwargs)


def base_directory(adapter_dir: str | Path) -> tuple[Path, dict]:
    """The base model directory an adapter was trained on, checked against the sha256 in its manifest."""
    adapter = load_adapter(adapter_dir)
    recorded = adapter.meta.get("base", "")
    directory = Path(recorded.split("#sha256:")[0])
    if not directory.is_dir():
        raise ManifestError(f"{adapter_dir}: its base {directory} does not exist (adapter.json `base`)")
    if base_id(directory) != recorded:
        raise ManifestError(f"{adapter_dir}: its base {directory} has changed since the adapter was trained "
                            f"(recorded {recorded}, now {base_id(directory)})")
    return directory, adapter.meta


def feature_model(adapter_dir: str | Path, *, seq_length: int, model_shape=None) -> tuple[AdaptedModel, str]:
    """(AdaptedModel holding a trainable copy of the adapter at `adapter_dir`, the base id)."""
    from .. import parallel
    from ..trainer import load_model

    directory, _ = base_directory(adapter_dir)
    if (directory / "palettized.safetensors").exists():
        from ..quantize.palettize import load_palettized

        base, manifest = load_palettized(directory, seq_length=seq_length)
        shape = manifest["model_shape"]
    else:
        base, info = load_model(directory, seq_length=seq_length)
        shape = info.manifest["model_shape"]
    if model_shape is not None and (shape["hidden_size"], shape["num_layers"], shape["vocab_size"]) != (
            model_shape.hidden_size, model_shape.num_layers, model_shape.vocab_size):
        raise ConfigError(f"--adapter-init {adapter_dir}: its base {directory} has shape {shape}, not the config's "
                          f"{model_shape.name} (hidden {model_shape.hidden_size}, {model_shape.num_layers} layers, "
                          f"vocab {model_shape.vocab_size})")
    for p in base.parameters():
        p.requires_grad_(False)
    recovery = load_adapter(adapter_dir, device=parallel.device())
    adapter = copy_adapter(recovery)
    host = AdapterHost(base)
    host.attach(adapter)
    return AdaptedModel(base, adapter, host), base_id(directory)


def save_feature_adapter(model: AdaptedModel, out: str | Path, *, base: str, adapter_init: str,
                         extra: dict) -> Path:
    return save_adapter(out, model.adapter, base=base,
                        extra={"initialised_from": str(Path(adapter_init).resolve()), **extra})
