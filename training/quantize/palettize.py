"""Palettization (AFM report 5.1): per-layer k-means lookup tables shared by groups of output channels,
2- and 4-bit layers mixed to a target bits-per-weight, the embedding in int8.

    cidermill quantize palettize CHECKPOINT --bpw 3.6 [--group-size 16] --out DIR

Which weights: every linear layer of the decoder (linear_qkv, linear_proj, linear_fc1, linear_fc2). Norm
weights stay fp32 (a few thousand numbers). The tied input/output embedding is int8 with one fp32 scale per
row (symmetric, scale = max|row| / 127); an untied output layer (imported models) likewise.

A LUT is the k-means (k = 2**bits) of the weights of `group_size` consecutive output channels (rows); each
weight is stored as its centre's index. Bits per weight of a layer = (index bits · n + LUT entries · 16) / n
(LUTs are stored in fp16). The target `--bpw` is over the palettized linear weights, the quantity the report
quotes for its 3.5-3.7 bpw mixes; the manifest also gives the bpw over every weight (embedding included).

Mixed bits, greedy by measured sensitivity: every layer starts at 4 bits; each layer alone is then set to 2
bits and the calibration loss measured; layers are demoted to 2 bits in order of loss increase per bit saved
until the average reaches the target (never above it).

Directory written: `palettized.safetensors` (per layer `<name>.idx` packed uint8 indices and `<name>.lut`
fp16 [groups, 2**bits]; `<embedding>.int8` + `.scale`; fp32 norms as they are) and `manifest.json`, written
last. `load_palettized` dequantizes into a megatron GPTModel built from the manifest's shape.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from manifests.config import require_number
from manifests.errors import ConfigError, ManifestError

from .. import checkpoint as ckpt
from .. import parallel
from .kmeans import kmeans, pack, unpack

MANIFEST = "manifest.json"
WEIGHTS = "palettized.safetensors"
FORMAT = "cidermill-palettized/1"
EMBEDDING = "embedding.word_embeddings.weight"
OUTPUT_LAYER = "output_layer.weight"  # present only with untied embeddings
LUT_BITS = 16  # fp16 LUT entries


@dataclass(frozen=True, kw_only=True)
class PalettizeConfig:
    bpw: float = 3.6  # target over the palettized linear weights
    group_size: int = 16  # output channels sharing one LUT
    bits: tuple[int, ...] = (4, 2)  # high, low
    seed: int = 0
    iters: int = 50
    calib_samples: int = 16
    # "activations": k-means weighted by the calibration batches' mean squared input of each column (a weight
    # multiplying a large activation counts more); "gradients": by each weight's mean squared gradient of
    # the calibration loss (diagonal Fisher); "none": plain k-means
    weighting: str = "activations"

    def __post_init__(self):
        if sorted(self.bits, reverse=True) != list(self.bits) or any(b not in (1, 2, 4, 8) for b in self.bits):
            raise ConfigError(f"palettize: bits must be descending values among 1, 2, 4, 8; got {self.bits}")
        # the lowest bit width is the least any layer can take: a lower target cannot be met (0, -1 and nan
        # used to run and write a model at the lowest width anyway)
        require_number(self.bpw, "--bpw", where="palettize", ge=min(self.bits))
        require_number(self.group_size, "--group-size", where="palettize", ge=1, integer=True)
        require_number(self.iters, "iters", where="palettize", ge=1, integer=True)
        require_number(self.calib_samples, "--calib-samples", where="palettize", ge=1, integer=True)
        if self.weighting not in ("none", "activations", "gradients"):
            raise ConfigError(f"palettize: weighting must be 'none', 'activations' or 'gradients'; "
                              f"got {self.weighting!r}")


def is_palettized(name: str, tensor: torch.Tensor) -> bool:
    return name.startswith("decoder.layers.") and name.endswith(".weight") and tensor.dim() == 2 and \
        any(k in name for k in ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"))


def layer_bpw(shape: tuple[int, int], bits: int, group_size: int) -> float:
    rows, cols = shape
    groups = -(-rows // group_size)
    return (bits * rows * cols + groups * (1 << bits) * LUT_BITS) / (rows * cols)


def _grouped(w: torch.Tensor, group_size: int) -> torch.Tensor:
    rows, cols = w.shape
    if rows % group_size:
        raise ConfigError(f"palettize: {rows} output channels are not a multiple of group_size {group_size}")
    return w.reshape(rows // group_size, group_size * cols)


def palettize_tensor(w: torch.Tensor, *, bits: int, group_size: int, seed: int = 0, iters: int = 50,
                     col_weights: torch.Tensor | None = None):
    """-> (lut [groups, 2**bits] fp16, indices [rows, cols] uint8). The LUT is rounded to fp16 after
    k-means, so dequantization is exactly what is stored. `col_weights`: weighted k-means, one weight per
    input column [cols] (activations) or per weight [rows, cols] (squared gradients)."""
    x = _grouped(w.float(), group_size)
    k = 1 << bits
    chunk = max(1, (1 << 25) // (x.shape[1] * k))  # keeps the [g, N, k] tensors to ~128 MiB
    weights = None
    if col_weights is not None and col_weights.dim() == 2:  # per weight (gradient / Fisher weighting)
        weights = _grouped(col_weights.float(), group_size)
    elif col_weights is not None:  # per input column (activation weighting)
        weights = col_weights.float()[None, None, :].expand(x.shape[0], group_size, -1).reshape(x.shape)
    centres, idx = kmeans(x, k, seed=seed, iters=iters, chunk=chunk, weights=weights)
    return centres.half(), idx.reshape(w.shape).to(torch.uint8)


def dequantize_tensor(lut: torch.Tensor, idx: torch.Tensor, group_size: int) -> torch.Tensor:
    rows, cols = idx.shape
    grouped = idx.reshape(rows // group_size, group_size * cols).long()
    return lut.float().gather(1, grouped).reshape(rows, cols)


def int8_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scale = (w.float().abs().amax(1) / 127).clamp(min=1e-12)
    return torch.round(w.float() / scale[:, None]).clamp(-127, 127).to(torch.int8), scale


def allocate_bits(sizes: dict[str, tuple[int, int]], sensitivity: dict[str, float], *, target: float,
                  bits: tuple[int, int], group_size: int) -> dict[str, int]:
    """Greedy: all layers at bits[0]; demote to bits[1] in order of sensitivity per bit saved (least hurt
    first) while the average bpw over the layers is above `target`; then, most sensitive first, return
    demoted layers to bits[0] where the average stays <= `target` (the last demotion can overshoot)."""
    hi, lo = bits
    n = {k: s[0] * s[1] for k, s in sizes.items()}
    cost = {k: {b: layer_bpw(s, b, group_size) * n[k] for b in (hi, lo)} for k, s in sizes.items()}
    total = sum(n.values())
    chosen = {k: hi for k in sizes}
    spent = sum(cost[k][hi] for k in sizes)
    order = sorted(sizes, key=lambda k: (sensitivity[k] / max(cost[k][hi] - cost[k][lo], 1e-9), k))
    demoted = []
    for k in order:
        if spent / total <= target:
            break
        chosen[k] = lo
        spent += cost[k][lo] - cost[k][hi]
        demoted.append(k)
    # the last demotion may overshoot: give back high bits to the most sensitive demoted layers that still fit
    for k in reversed(demoted):
        if (spent + cost[k][hi] - cost[k][lo]) / total <= target:
            chosen[k] = hi
            spent += cost[k][hi] - cost[k][lo]
    return chosen


@dataclass
class Palettized:
    state: dict[str, torch.Tensor]  # dequantized state dict for the megatron model
    stored: dict[str, torch.Tensor]  # what goes to disk
    manifest: dict


def palettize_state(state: dict[str, torch.Tensor], layer_bits: dict[str, int], *, group_size: int,
                    seed: int = 0, iters: int = 50, col_weights: dict | None = None) -> Palettized:
    """Quantize a state dict with the given bits per layer (16 = leave that layer in fp32)."""
    deq, stored, layers = {}, {}, {}
    paletted_bits = paletted_n = 0.0
    for name, w in state.items():
        if not isinstance(w, torch.Tensor) or name.endswith("_extra_state"):
            continue
        if name in layer_bits and layer_bits[name] < 16:
            b = layer_bits[name]
            lut, idx = palettize_tensor(w, bits=b, group_size=group_size, seed=seed, iters=iters,
                                        col_weights=(col_weights or {}).get(name))
            deq[name] = dequantize_tensor(lut, idx, group_size).to(w.dtype)
            stored[name + ".lut"] = lut
            stored[name + ".idx"] = torch.from_numpy(pack(idx.numpy(), b))
            bpw = layer_bpw(tuple(w.shape), b, group_size)
            layers[name] = {"bits": b, "shape": list(w.shape), "groups": int(lut.shape[0]), "bpw": bpw}
        elif name in (EMBEDDING, OUTPUT_LAYER):  # the vocabulary tables: the embedding (and an untied output)
            q, scale = int8_rows(w)
            deq[name] = (q.float() * scale[:, None]).to(w.dtype)
            stored[name + ".int8"], stored[name + ".scale"] = q, scale.float()
            bpw = 8 + 32 / w.shape[1]
            layers[name] = {"bits": 8, "shape": list(w.shape), "format": "int8-per-row", "bpw": bpw}
        else:
            deq[name] = w
            stored[name] = w.float().contiguous()
            layers[name] = {"bits": 32, "shape": list(w.shape)}
            bpw = 32.0
        if name in layer_bits:
            paletted_bits += bpw * w.numel()
            paletted_n += w.numel()
    every = sum(v["bpw"] * int(np.prod(v["shape"])) if "bpw" in v else 32 * int(np.prod(v["shape"]))
                for v in layers.values()) / sum(int(np.prod(v["shape"])) for v in layers.values())
    manifest = {"format": FORMAT, "group_size": group_size, "seed": seed, "layers": layers,
                "bpw_palettized": paletted_bits / max(paletted_n, 1), "bpw_all_weights": every}
    return Palettized(state=deq, stored=stored, manifest=manifest)


def input_energy(model, names: list[str], batches: list[dict]) -> dict[str, torch.Tensor]:
    """Mean squared input of each column of each named linear layer over `batches` (forward hooks)."""
    from .evalset import mean_loss

    modules = dict(model.named_modules())
    sums: dict[str, torch.Tensor] = {}
    counts: dict[str, int] = {}

    def hook_for(name):
        def hook(module, args, output):
            x = args[0].detach().float().reshape(-1, args[0].shape[-1])
            sums[name] = sums.get(name, 0) + (x * x).sum(0)
            counts[name] = counts.get(name, 0) + x.shape[0]
        return hook

    handles = [modules[n[: -len(".weight")]].register_forward_hook(hook_for(n)) for n in names]
    try:
        mean_loss(model, batches)
    finally:
        for h in handles:
            h.remove()
    return {n: (sums[n] / counts[n]).cpu() for n in names}


def gradient_fisher(model, names: list[str], batches: list[dict]) -> dict[str, torch.Tensor]:
    """Per weight of each named layer: the mean over calibration samples of the squared gradient of that
    sample's loss (the diagonal of the empirical Fisher). A weight whose change moves the loss more gets more
    say in its group's k-means. One backward pass per sample (samples, not batches: a batch gradient
    averages the signs away)."""
    from ..losses import cross_entropies

    params = dict(model.named_parameters())
    sums = {n: torch.zeros_like(params[n], dtype=torch.float32) for n in names}
    wanted = {n: params[n].requires_grad for n in names}
    dev = parallel.device()
    count = 0
    model.eval()
    for b in batches:
        for i in range(b["tokens"].shape[0]):
            for n in names:
                params[n].requires_grad_(True)
                params[n].grad = None
            logits = model(b["tokens"][i: i + 1].to(dev), b["position_ids"][i: i + 1].to(dev), None)
            (ce,) = cross_entropies(logits, [b["labels"][i: i + 1].to(dev)])
            mask = b["loss_mask"][i: i + 1].to(dev)
            ((ce * mask).sum() / mask.sum().clamp_min(1.0)).backward()
            for n in names:
                sums[n] += params[n].grad.float() ** 2
            count += 1
    for n in names:
        params[n].grad = None
        params[n].requires_grad_(wanted[n])
    model.zero_grad(set_to_none=True)
    return {n: (sums[n] / max(count, 1)).cpu() for n in names}


def sensitivities(model, state: dict, names: list[str], batches: list[dict], *, bits: int, group_size: int,
                  seed: int, col_weights: dict | None = None) -> tuple[float, dict[str, float]]:
    """Calibration loss of the float model, and its increase when each layer alone is at `bits`."""
    from .evalset import mean_loss

    base = mean_loss(model, batches)
    out = {}
    params = dict(model.named_parameters())
    for name in names:
        original = params[name].detach().clone()
        lut, idx = palettize_tensor(state[name], bits=bits, group_size=group_size, seed=seed,
                                    col_weights=(col_weights or {}).get(name))
        with torch.no_grad():
            params[name].copy_(dequantize_tensor(lut, idx, group_size))
            out[name] = mean_loss(model, batches) - base
            params[name].copy_(original)
    return base, out


def calibration_manifest(info: ckpt.CheckpointInfo, *, cache_dir: Path, calib_text: str | Path | None = None,
                         seq_length: int | None = None) -> dict:
    """The checkpoint's manifest, with `data` = the blend its calibration and held-out samples come from: its
    own pretraining blend, or (`calib_text`: an import-hf checkpoint names none) documents from a file,
    tokenized with the checkpoint's tokenizer (training/text_data.py)."""
    manifest = dict(info.manifest)
    if calib_text is None:
        if "blend" not in manifest.get("data", {}):
            raise ConfigError(f"{info.directory}: the checkpoint names no training blend (an import?); pass "
                              "--calib-text FILE (JSONL records with `text`) for calibration data")
        return manifest
    from ..chat import load_tokenizer
    from ..export_hf import tokenizer_spec
    from ..text_data import text_blend_entry

    manifest["data"] = text_blend_entry(calib_text, load_tokenizer(tokenizer_spec(info)), cache_dir=cache_dir,
                                        seq_length=seq_length or 256)
    manifest["config"] = {}  # the blend's held-out share is the default, not the source run's
    return manifest


def palettize_checkpoint(checkpoint: str | Path, out: str | Path, cfg: PalettizeConfig = PalettizeConfig(),
                         *, log=print, calib_text: str | Path | None = None, seq_length: int | None = None) -> Path:
    """`calib_text` / `seq_length`: calibration documents for a checkpoint without a training blend."""
    from ..adapters.store import base_id  # the source's weights hash: a "kl" recovery checks its teacher by it
    from ..trainer import load_model
    from .evalset import eval_set

    info = ckpt.open_checkpoint(checkpoint)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = calibration_manifest(info, cache_dir=out / ".data-cache", calib_text=calib_text, seq_length=seq_length)
    parallel.setup(parallel.ParallelConfig(kernels=info.manifest.get("kernels", "local")))
    # the calibration blend's length (--calib-text sets its own), else the length the checkpoint trained at
    seq = ckpt.seq_length_of(ckpt.CheckpointInfo(info.directory, manifest))
    model, _ = load_model(info.directory, seq_length=seq)
    state = {k: v.detach().cpu() for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)}
    names = [k for k, v in state.items() if is_palettized(k, v)]
    if not names:
        raise ManifestError(f"{info.directory}: no linear layers to palettize (tensor-parallel shards?)")
    t0 = time.perf_counter()
    data = eval_set(manifest, cache_dir=out / ".data-cache", calib_samples=cfg.calib_samples, valid_samples=8)
    col_weights = input_energy(model, names, data.calib) if cfg.weighting == "activations" else \
        gradient_fisher(model, names, data.calib) if cfg.weighting == "gradients" else None
    base, sens = sensitivities(model, state, names, data.calib, bits=cfg.bits[-1], group_size=cfg.group_size,
                               seed=cfg.seed, col_weights=col_weights)
    layer_bits = allocate_bits({k: tuple(state[k].shape) for k in names}, sens, target=cfg.bpw,
                               bits=(cfg.bits[0], cfg.bits[-1]), group_size=cfg.group_size)
    result = palettize_state(state, layer_bits, group_size=cfg.group_size, seed=cfg.seed, iters=cfg.iters,
                             col_weights=col_weights)
    result.manifest.update({
        "source_checkpoint": str(info.directory.resolve()), "source_base": base_id(info.directory),
        "source_run": info.manifest.get("run"),
        "source_step": info.manifest.get("step"), "model_shape": info.manifest["model_shape"],
        "rotary_base": info.manifest["rotary_base"], "kernels": info.manifest.get("kernels", "local"),
        "data": manifest["data"], "config": {**asdict(cfg), "bits": list(cfg.bits)},
        "calibration": {"samples": cfg.calib_samples, "split": "train", "float_loss": base,
                        "loss_increase_at_low_bits": sens},
        "seconds": time.perf_counter() - t0,
    })
    write_palettized(out, result)
    log(f"palettized {len(names)} layers to {result.manifest['bpw_palettized']:.3f} bpw "
        f"({sum(b == cfg.bits[-1] for b in layer_bits.values())} at {cfg.bits[-1]} bits; all weights "
        f"{result.manifest['bpw_all_weights']:.3f} bpw) -> {out}")
    return out


def write_palettized(out: Path, result: Palettized) -> None:
    """Weights, then the manifest that names their sha256, each written to a temporary name and renamed: a
    kill between the two renames leaves a pair whose hashes disagree, which loading refuses (the folder
    also holds adapters and a data cache, so it is not replaced whole)."""
    import hashlib

    from safetensors.torch import save_file

    tmp_weights = out / (WEIGHTS + ".tmp")
    save_file({k: v.contiguous() for k, v in result.stored.items()}, str(tmp_weights))
    manifest = dict(result.manifest, weights_sha256=hashlib.sha256(tmp_weights.read_bytes()).hexdigest())
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True))
    os.replace(tmp_weights, out / WEIGHTS)
    os.replace(tmp, out / MANIFEST)


def read_manifest(directory: str | Path) -> dict:
    path = Path(directory) / MANIFEST
    if not path.exists():
        raise ManifestError(f"{directory}: no {MANIFEST}; not a palettized model")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}: not valid JSON ({exc})") from None
    if manifest.get("format") != FORMAT:
        raise ManifestError(f"{path}: format {manifest.get('format')!r}, expected {FORMAT!r}")
    return manifest


def dequantized_state(directory: str | Path) -> dict[str, torch.Tensor]:
    """The megatron state dict a palettized directory stands for (LUT[index], int8 · scale)."""
    from safetensors.torch import load_file

    import hashlib

    manifest = read_manifest(directory)
    weights = Path(directory) / WEIGHTS
    want = manifest.get("weights_sha256")
    if want and hashlib.sha256(weights.read_bytes()).hexdigest() != want:
        raise ManifestError(f"{weights}: sha256 does not match {MANIFEST}; the palettized weights were changed or "
                            "a palettize run was interrupted: palettize again")
    stored = load_file(str(weights))
    gs = int(manifest["group_size"])
    state = {}
    for name, meta in manifest["layers"].items():
        try:
            if meta.get("format") == "int8-per-row":
                state[name] = stored[name + ".int8"].float() * stored[name + ".scale"][:, None]
            elif meta["bits"] < 16:
                rows, cols = meta["shape"]
                idx = unpack(stored[name + ".idx"].numpy(), meta["bits"], rows * cols).reshape(rows, cols)
                state[name] = dequantize_tensor(stored[name + ".lut"], torch.from_numpy(idx.copy()), gs)
            else:
                state[name] = stored[name]
        except KeyError as exc:
            raise ManifestError(f"{directory}/{WEIGHTS}: tensor {exc} for layer {name} is missing") from None
    return state


def load_palettized(directory: str | Path, *, seq_length: int | None = None, parallel_output: bool = True):
    """A megatron GPTModel (current parallel setup) holding the dequantized weights; returns (model, manifest)."""
    from ..model import build_model, get_shape

    manifest = read_manifest(directory)
    shape = dict(manifest["model_shape"])
    model = build_model(get_shape(shape.pop("name"), **shape),
                        seq_length=seq_length or int(manifest["data"]["seq_length"]),
                        rotary_base=manifest["rotary_base"], parallel_output=parallel_output,
                        kernels=manifest.get("kernels", "local"))
    ckpt.load_state_dict_(model, dequantized_state(directory))
    return model, manifest


def export_hf_dequantized(directory: str | Path, out: str | Path) -> Path:
    """The HF (Qwen3) export of a palettized model: `train export-hf` of its source checkpoint (config,
    tokenizer), with the weights replaced by the dequantized ones (fp32, LUT[index] / int8 · scale)."""
    from safetensors.torch import save_file

    from ..adapters.store import base_id
    from ..export_hf import convert_state, export_hf

    manifest = read_manifest(directory)
    out = export_hf(manifest["source_checkpoint"], out)
    save_file(convert_state(dequantized_state(directory), manifest["model_shape"]), str(out / "model.safetensors"),
              metadata={"format": "pt"})
    provenance = json.loads((out / "export.json").read_text())
    provenance["palettized"] = {"directory": str(Path(directory).resolve()), "bpw": manifest["bpw_palettized"]}
    provenance["base_id"] = base_id(directory)  # what `quantize export-adapter` checks an adapter's base against
    (out / "export.json").write_text(json.dumps(provenance, indent=2))
    return out
