"""One rank of a post-training run for test_post_parallel (spawned by torch.multiprocessing)."""

from __future__ import annotations

import json
import os


def run(rank: int, world: int, port: int, method: str, raw: dict, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    import torch

    from training.post_config import from_dict

    cfg = from_dict(raw)
    if method == "sft":
        from training.sft import train_sft as train
    else:
        from training.reward import train_rm as train
    result = train(cfg, log=lambda *a: None)
    if rank == 0:
        state = torch.load(result.checkpoint / "model.pt", map_location="cpu", weights_only=True)
        json.dump({"losses": result.losses, "grad_norms": result.grad_norms,
                   "weights": {k: v.double().flatten().tolist() for k, v in state.items()
                               if isinstance(v, torch.Tensor) and v.is_floating_point()},
                   "eval": result.evals[-1][1].get("loss")}, open(out, "w"))
