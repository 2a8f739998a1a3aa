"""Adapter-only checkpoints (adapter.safetensors + adapter.json) and their PEFT export.

adapter.json: format, base id (the palettized model or checkpoint the adapter was trained on, with the sha256
of its weights file), rank, alpha, targets, init, and whatever the trainer adds (steps, data, losses).

PEFT export (`export_peft`): adapter_config.json + adapter_model.safetensors whose keys follow the HF export's
Qwen3 module names (training/export_hf.py), so `PeftModel.from_pretrained(hf_model, DIR)` and vLLM's multi-LoRA
serving load it. megatron fuses modules that Qwen3 keeps apart; a fused LoRA splits exactly, because the
modules share the input:
    linear_qkv (A, B)  -> q_proj/k_proj/v_proj: lora_A = A for each; lora_B = B's rows of the query heads, the
                          key head and the value head of every KV group (the same regrouping as the weights)
    linear_fc1 (A, B)  -> gate_proj/up_proj: lora_A = A; lora_B = B[:ffn], B[ffn:]
    linear_proj -> o_proj, linear_fc2 -> down_proj (unchanged)
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import torch

from manifests.errors import ManifestError

from .lora import Adapter, LoraConfig

FORMAT = "cidermill-lora/1"
WEIGHTS = "adapter.safetensors"
MANIFEST = "adapter.json"


def base_id(path: str | Path) -> str:
    """`<dir>#sha256:<16 hex>` of a palettized model dir (its weights file) or a checkpoint (model.pt)."""
    path = Path(path)
    for name in ("palettized.safetensors", "model.pt"):
        if (path / name).exists():
            digest = hashlib.sha256((path / name).read_bytes()).hexdigest()[:16]
            return f"{path.resolve()}#sha256:{digest}"
    raise ManifestError(f"{path}: neither a palettized model nor a state-dict checkpoint")


def save_adapter(directory: str | Path, adapter: Adapter, *, base: str, extra: dict | None = None) -> Path:
    from safetensors.torch import save_file

    from ..checkpoint import commit_dir

    directory = Path(directory)
    partial = directory.parent / f".{directory.name}.partial"  # written whole, then renamed into place
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    save_file(adapter.state_dict(), str(partial / WEIGHTS))
    c = adapter.config
    manifest = {"format": FORMAT, "base": base, "rank": c.rank, "alpha": c.alpha if c.alpha is not None else c.rank,
                "targets": list(c.targets), "init": c.init,
                "modules": sorted(k.replace("/", ".") for k in adapter.A), **(extra or {})}
    (partial / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    commit_dir(partial, directory)
    return directory


def load_adapter(directory: str | Path, *, expect_base: str | None = None, device=None) -> Adapter:
    from safetensors.torch import load_file

    directory = Path(directory)
    path = directory / MANIFEST
    if not path.exists():
        raise ManifestError(f"{directory}: no {MANIFEST}; not an adapter checkpoint")
    manifest = json.loads(path.read_text())
    if manifest.get("format") != FORMAT:
        raise ManifestError(f"{path}: format {manifest.get('format')!r}, expected {FORMAT!r}")
    if expect_base is not None and manifest["base"] != expect_base:
        raise ManifestError(f"{path}: trained on base {manifest['base']}, not {expect_base}")
    tensors = load_file(str(directory / WEIGHTS))
    A, B = torch.nn.ParameterDict(), torch.nn.ParameterDict()
    for name in manifest["modules"]:
        try:
            A[name.replace(".", "/")] = torch.nn.Parameter(tensors[f"{name.replace('.', '/')}.lora_A"].to(device))
            B[name.replace(".", "/")] = torch.nn.Parameter(tensors[f"{name.replace('.', '/')}.lora_B"].to(device))
        except KeyError as exc:
            raise ManifestError(f"{directory}/{WEIGHTS}: missing {exc} for module {name}") from None
    config = LoraConfig(rank=int(manifest["rank"]), alpha=float(manifest["alpha"]),
                        targets=tuple(manifest["targets"]), init=manifest["init"])
    return Adapter(config=config, A=A, B=B, meta=manifest)


def peft_tensors(adapter: Adapter, shape: dict) -> dict[str, torch.Tensor]:
    """PEFT key -> tensor for an adapter of a TP=1 megatron model of `shape` (a checkpoint's model_shape)."""
    nq, ng, hd = shape["num_attention_heads"], shape["num_query_groups"], shape["head_dim"]
    ffn = shape["ffn_hidden_size"]
    out = {}
    for key in adapter.A:
        name = key.replace("/", ".")  # decoder.layers.I.self_attention.linear_qkv
        i, kind = name.split(".")[2], name.split(".")[-1]
        a, b = adapter.A[key].detach().float().cpu(), adapter.B[key].detach().float().cpu()
        pre = f"base_model.model.model.layers.{i}."
        if kind == "linear_qkv":
            per_group = b.view(ng, nq // ng + 2, hd, -1)
            parts = {"self_attn.q_proj": per_group[:, : nq // ng].reshape(nq * hd, -1),
                     "self_attn.k_proj": per_group[:, nq // ng].reshape(ng * hd, -1),
                     "self_attn.v_proj": per_group[:, nq // ng + 1].reshape(ng * hd, -1)}
        elif kind == "linear_fc1":
            parts = {"mlp.gate_proj": b[:ffn], "mlp.up_proj": b[ffn:]}
        elif kind == "linear_proj":
            parts = {"self_attn.o_proj": b}
        else:
            parts = {"mlp.down_proj": b}
        for module, bb in parts.items():
            out[f"{pre}{module}.lora_A.weight"] = a.contiguous().clone()
            out[f"{pre}{module}.lora_B.weight"] = bb.contiguous().clone()
    return out


PEFT_MODULES = {"linear_qkv": ["q_proj", "k_proj", "v_proj"], "linear_proj": ["o_proj"],
                "linear_fc1": ["gate_proj", "up_proj"], "linear_fc2": ["down_proj"]}


def export_peft(adapter: Adapter, shape: dict, out: str | Path, *, base_model: str | None = None) -> Path:
    from safetensors.torch import save_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_file(peft_tensors(adapter, shape), str(out / "adapter_model.safetensors"), metadata={"format": "pt"})
    c = adapter.config
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": c.rank,
              "lora_alpha": c.alpha if c.alpha is not None else c.rank, "lora_dropout": 0.0, "bias": "none",
              "target_modules": sorted(m for t in c.targets for m in PEFT_MODULES[t]), "fan_in_fan_out": False,
              "use_rslora": False, "inference_mode": True, "base_model_name_or_path": base_model}
    (out / "adapter_config.json").write_text(json.dumps(config, indent=2))
    return out
