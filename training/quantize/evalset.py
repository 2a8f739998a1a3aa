"""Calibration and held-out samples for a checkpoint, rebuilt from its manifest (the blend it trained on).

Calibration batches come from the training split (text the model has seen: fine for measuring how much a
layer's quantization hurts); reported losses come from the held-out split (documents never trained on).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from .. import checkpoint as ckpt
from .. import parallel
from ..data import batch_at, blend_from_pairs, build_splits, valid_fraction
from ..losses import cross_entropies


@dataclass
class EvalSet:
    calib: list[dict]  # batches from the training split
    valid: list[dict]  # batches from the held-out split
    seq_length: int


def eval_set(info: ckpt.CheckpointInfo | dict, *, cache_dir: str | Path, calib_samples: int = 16,
             valid_samples: int = 32, batch: int = 8) -> EvalSet:
    """`info`: a checkpoint, or a manifest dict whose `data` names the blend (a palettized model's, or
    palettize.calibration_manifest's for a checkpoint without one)."""
    manifest = info if isinstance(info, dict) else info.manifest
    data = manifest["data"]
    raw = data["blend"]
    blend = blend_from_pairs(list(zip(raw[0::2], raw[1::2])), vocab_size=int(data["vocab_size"]),
                             eod_id=int(data["eod_id"]), source_id=data["source_id"])
    dcfg = (manifest.get("config") or {}).get("data", {})
    share = valid_fraction(blend, fraction=dcfg.get("valid_fraction"), documents=dcfg.get("valid_documents"),
                           tokens=dcfg.get("valid_tokens"))
    seq = int(data["seq_length"])
    splits = build_splits(blend, seq_length=seq, seed=int(data["seed"]), n_train=max(calib_samples, 1),
                          n_valid=valid_samples, cache_dir=cache_dir, valid_share=share)

    def batches(ds, n):
        return [batch_at(ds, s, min(batch, n - s)) for s in range(0, n, batch)]

    return EvalSet(calib=batches(splits.train, calib_samples), valid=batches(splits.valid, valid_samples),
                   seq_length=seq)


@torch.no_grad()
def mean_loss(model, batches: list[dict]) -> float:
    """Token-weighted cross-entropy of `model` over `batches` (labels, loss mask)."""
    model.eval()
    total = count = 0.0
    dev = parallel.device()
    for b in batches:
        logits = model(b["tokens"].to(dev), b["position_ids"].to(dev), None)
        (ce,) = cross_entropies(logits, [b["labels"].to(dev)])
        mask = b["loss_mask"].to(dev)
        total += float((ce * mask).sum())
        count += float(mask.sum())
    return total / max(count, 1.0)
