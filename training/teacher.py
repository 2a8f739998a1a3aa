"""The teacher's top-1 ids for distillation, as the trainer reads them: online (the teacher model runs beside
the student) or from ids precomputed by `distill.precompute_top1`. Split from distill.py so the trainer
imports this and distill.py imports the trainer, with no cycle between them."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import torch

from manifests.errors import ConfigError

from .checkpoint import load_model
from .config import DistillConfig


def _sidecar(prefix: str) -> Path:
    return Path(prefix + ".top1.json")


class TeacherLabels:
    """top1(batch) -> [B,S] teacher ids for the batch's samples, online or from precomputed data."""

    def __init__(self, *, model=None, indexed=None):
        self.model = model
        self.indexed = indexed

    @classmethod
    def from_config(cls, cfg: DistillConfig, *, plan, global_batch: int, bf16: bool = False) -> "TeacherLabels":
        if cfg.teacher:
            model, _ = load_model(cfg.teacher, seq_length=plan.seq_length, parallel_output=False)
            if bf16 and torch.cuda.is_available():  # the teacher only runs forward: bf16 weights, as planned
                model = model.bfloat16()
            model.eval()
            for p in model.parameters():
                p.requires_grad_(False)
            return cls(model=model)
        from megatron.core.datasets.indexed_dataset import IndexedDataset

        facts = json.loads(_sidecar(cfg.teacher_top1).read_text())
        want = {"data": plan.blend.id, "seq_length": plan.seq_length, "data_seed": plan.data_seed,
                "n_train": plan.steps * global_batch}
        got = {k: facts.get(k) for k in want}
        if got != want:
            raise ConfigError(f"{cfg.teacher_top1}: precomputed for {got}, but this run reads {want}; "
                              "precompute again for this run")
        shards = facts.get("shards") or [{"prefix": Path(cfg.teacher_top1).name, "first": 0,
                                          "count": want["n_train"]}]
        base = Path(cfg.teacher_top1).parent
        return cls(indexed=[(int(sh["first"]), int(sh["count"]), IndexedDataset(str(base / sh["prefix"])))
                            for sh in shards])

    @torch.no_grad()
    def top1(self, batch: dict, *, autocast=contextlib.nullcontext) -> torch.Tensor:
        if self.model is not None:
            with autocast():
                logits = self.model(batch["tokens"], batch["position_ids"], None)  # [B,S,V], gathered
            return logits.argmax(dim=-1)
        rows = [np.asarray(self._row(int(i))) for i in batch["sample_index"]]
        return torch.from_numpy(np.stack(rows).astype(np.int64)).to(batch["tokens"].device)

    def _row(self, sample: int):
        for first, count, ds in self.indexed:  # a few shards, contiguous sample ranges
            if first <= sample < first + count:
                return ds[sample - first]
        raise ConfigError(f"precomputed top-1 ids: no shard holds sample {sample}")
