"""Distillation (AFM report 3.2.1 / appendix): the target is a convex combination of the true label and the
teacher's top-1 prediction, 0.9 on the teacher. The loss itself is in `losses.distillation_loss`.

The teacher's top-1 ids come either online (the teacher model runs beside the student) or precomputed:
`precompute_top1` runs the teacher once over the run's training samples, in the order the student will read
them, and writes one id sequence per sample as a Megatron indexed dataset, with a JSON sidecar that pins the
blend, sequence length, seed and sample count. Both give the same ids, hence the same training run.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from . import parallel
from .config import TrainConfig
from .teacher import TeacherLabels, _sidecar  # the reading side, which the trainer imports (no cycle)
from .checkpoint import load_model
from .plan import plan_run


@torch.no_grad()
def precompute_top1(cfg: TrainConfig, *, teacher: str, prefix: str | Path, micro_batch: int = 16) -> str:
    """Write the teacher's top-1 ids for every training sample the run `cfg` will read; returns the prefix.

    Under torchrun the samples are split into contiguous ranges, one per data-parallel rank: each rank
    writes `<prefix>.part-<rank>-of-<n>.bin/.idx` (tensor-parallel rank 0 of it does; the others help
    compute the same forward), and rank 0 writes the sidecar `<prefix>.top1.json` listing the parts."""
    import torch.distributed as dist
    from megatron.core import parallel_state

    from .data import batch_at, build_splits, valid_share_for, write_indexed

    parallel.setup(cfg.parallel, seed=cfg.seed)
    plan = plan_run(cfg)
    n_train = plan.steps * cfg.global_batch
    splits = build_splits(plan.blend, seq_length=plan.seq_length, seed=plan.data_seed, n_train=n_train,
                          n_valid=cfg.data.valid_samples,
                          cache_dir=cfg.data.cache_dir or Path(cfg.out_dir) / "data-cache",
                          valid_share=valid_share_for(cfg.data, plan.blend))
    model, _ = load_model(teacher, seq_length=plan.seq_length, parallel_output=False)
    if torch.cuda.is_available() and cfg.parallel.precision == "bf16":
        model = model.bfloat16()
    model.eval()
    labels = TeacherLabels(model=model)
    dtype = np.uint16 if plan.blend.vocab_size <= 65536 else np.int32
    dp_rank, dp_size = parallel.data_parallel_rank_and_size()
    per_rank = -(-n_train // dp_size)
    ranges = [(r * per_rank, max(0, min(per_rank, n_train - r * per_rank))) for r in range(dp_size)]
    prefix = str(prefix)
    part = (lambda r: f"{prefix}.part-{r:05d}-of-{dp_size:05d}") if dp_size > 1 else (lambda r: prefix)

    def rows(first: int, count: int):
        for start in range(first, first + count, micro_batch):
            size = min(micro_batch, first + count - start)
            batch = {k: v.to(parallel.device()) for k, v in batch_at(splits.train, start, size).items()}
            yield from labels.top1(batch).cpu().numpy()

    first, count = ranges[dp_rank]
    if parallel_state.get_tensor_model_parallel_rank() == 0:  # streamed to disk, never held in memory
        write_indexed(part(dp_rank), rows(first, count), dtype=dtype)
    else:  # the other tensor-parallel ranks take part in the same forward passes
        for _ in rows(first, count):
            pass
    if dist.is_initialized():
        dist.barrier()
    if parallel.is_main():
        _sidecar(prefix).write_text(json.dumps({
            "teacher": str(teacher), "data": plan.blend.id, "seq_length": plan.seq_length,
            "data_seed": plan.data_seed, "n_train": n_train,
            "shards": [{"prefix": Path(part(r)).name, "first": f, "count": c} for r, (f, c) in enumerate(ranges)]},
            indent=2))
    if dist.is_initialized():
        dist.barrier()
    return prefix
