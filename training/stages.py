"""The AFM pretraining chain: core -> continued -> context-lengthening, each from its own mixture manifest
and the previous stage's checkpoint (weights only: each stage has its own optimizer state and schedule)."""

from __future__ import annotations

from .config import TrainConfig, with_
from .run_dir import check_distinct_out_dirs
from .trainer import TrainResult, train


def run_stages(configs: list[TrainConfig], *, init_from: str | None = None, log=print) -> list[TrainResult]:
    check_distinct_out_dirs(configs)  # before any stage runs
    results = []
    previous = init_from
    for cfg in configs:
        if previous and not cfg.init_from:
            cfg = with_(cfg, init_from=str(previous))
        log(f"=== stage {cfg.stage}: {cfg.name} (init from {cfg.init_from or 'scratch'}) ===")
        result = train(cfg, log=log)
        results.append(result)
        previous = result.checkpoint
    return results
