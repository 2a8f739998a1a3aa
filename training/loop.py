"""The optimizer-step loop of every gradient recipe: pretraining stages, distillation and pruned-student
training (trainer.py), SFT, the reward model and DPO/IPO (post_loop.py). They differ only in where a
micro-batch comes from and what its loss is, so those two are passed in; everything else is here once:

- `start`: the data-parallel checks, megatron's bf16 / DDP / distributed optimizer on GPU
  (training/gpu_optim.py) or the model and its optimizer directly, the run directory (lock, identity,
  interrupted saves: training/run_dir.py), resuming (verified weights, optimizer and RNG state), torch DDP
  over the data-parallel group.
- `run_steps`: step k reads global items [k·G, (k+1)·G); rank r takes the r-th `micro_batch` slice of each
  `micro_batch`·dp block, so any data-parallel size computes the same micro-batches (and the same mean of
  their losses). Gradients are accumulated (DDP syncs on the last micro-batch only), then AXLearn's
  skip-and-clip and the optimizer (`optimizer_step`). A skipped step does not move the schedule. A run
  whose steps are all skipped, or `optim.max_skipped_in_row` in a row, stops with an error: skipping every
  step on NaN and publishing the untouched (or NaN) model as a result is the silent failure this prevents.
- `save`: the checkpoint with the run identity and data position, only while the run holds its directory;
  `check_finite` refuses to save non-finite weights.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from manifests.errors import ConfigError, FatalError

from . import checkpoint as ckpt
from . import parallel
from .optim import build_optimizer, skip_or_clip_grad_norm_
from .run_dir import RunDir


@dataclass
class Run:
    """What `start` prepared: the module whose parameters step (`model`, what checkpoints hold), the one the
    loop calls (`train_model`: the model, megatron's wrapper or torch DDP), the optimizer, the run directory."""

    cfg: object  # TrainConfig or PostTrainConfig: name, global_batch, micro_batch, optim, out_dir
    model: torch.nn.Module
    train_model: torch.nn.Module
    optimizer: object
    directory: RunDir
    start: int = 0
    skipped: int = 0  # steps skipped before `start` (from the checkpoint resumed)
    dp_rank: int = 0
    dp_size: int = 1

    @property
    def n_micro(self) -> int:
        return self.cfg.global_batch // (self.cfg.micro_batch * self.dp_size)

    @property
    def resumed(self) -> ckpt.CheckpointInfo | None:
        return self.directory.resume_from

    def close(self) -> None:
        self.directory.close()


@dataclass
class Steps:
    """Per step run in this session: the objective, the loss function's figures, the global gradient norm."""

    losses: list[float] = field(default_factory=list)
    figures: list[dict] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    skipped_steps: int = 0  # over the whole run, resumed part included
    seconds: float = 0.0


def check_batch(cfg, dp_size: int) -> None:
    if cfg.global_batch % (cfg.micro_batch * dp_size):
        raise ConfigError(f"{cfg.name}: global_batch {cfg.global_batch} must be a multiple of micro_batch "
                          f"{cfg.micro_batch} x data-parallel size {dp_size}")


def start(cfg, model, directory: RunDir, *, log, find_unused: bool = False) -> Run:
    """Wrap the model and resume from `directory` (opened by run_dir.open_run: locked, identity checked)
    when it says so (see the module docstring)."""
    dp_rank, dp_size = parallel.data_parallel_rank_and_size()
    check_batch(cfg, dp_size)
    dev = parallel.device()
    megatron_path = dev.type == "cuda" and (cfg.parallel.precision == "bf16" or cfg.parallel.distributed_optimizer)
    if megatron_path:
        from .gpu_optim import wrap_for_gpu

        train_model, optimizer = wrap_for_gpu(model, cfg)
    else:
        train_model, optimizer = model, build_optimizer(model, cfg.optim)
    run = Run(cfg, model, train_model, optimizer, directory, dp_rank=dp_rank, dp_size=dp_size)
    try:
        for note in directory.notes:
            log(f"[{cfg.name}] {directory.path}: {note}")
        info = directory.resume_from
        if info is not None:
            ckpt.load_weights(info, model)
            ckpt.load_training_state(info, optimizer)
            run.start = info.step
            run.skipped = int(info.manifest.get("skipped_steps", 0))
            log(f"[{cfg.name}] resumed from {info.directory} at step {run.start}")
        if dp_size > 1 and not megatron_path:
            from megatron.core import parallel_state

            run.train_model = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[dev.index] if dev.type == "cuda" else None,
                process_group=parallel_state.get_data_parallel_group(), find_unused_parameters=find_unused)
    except BaseException:
        run.close()
        raise
    return run


def run_steps(run: Run, *, end: int, schedule, batch_at: Callable[[int, int], dict], loss_fn: Callable,
              log, after_step: Callable[[int, "Steps", float], None] | None = None) -> Steps:
    """Steps [run.start, end). `batch_at(first, size)`: this rank's micro-batch, items first..first+size-1
    of the global order; `loss_fn(train_model, batch)` -> (loss, {name: float}); `after_step(done, steps,
    lr_factor)` (steps.losses[-1] etc. are this step's) logs, evaluates and saves as the recipe wants."""
    cfg, dev = run.cfg, parallel.device()
    limit = cfg.optim.max_skipped_in_row
    out = Steps(skipped_steps=run.skipped)
    in_row = 0
    t0 = time.perf_counter()
    run.model.train()
    for step in range(run.start, end):
        # as in AXLearn, a dropped step does not advance the schedule (its count lives in the optimizer state)
        lr_factor = schedule.apply(run.optimizer, step - out.skipped_steps)
        run.optimizer.zero_grad(set_to_none=True)
        loss_sum, sums = 0.0, {}
        for micro in range(run.n_micro):
            first = step * cfg.global_batch + (micro * run.dp_size + run.dp_rank) * cfg.micro_batch
            batch = batch_at(first, cfg.micro_batch)
            last = run.dp_size == 1 or micro == run.n_micro - 1
            with contextlib.nullcontext() if last else run.train_model.no_sync():
                loss, figures = loss_fn(run.train_model, batch)
                (loss / run.n_micro).backward()
            loss_sum += float(loss.detach()) / run.n_micro
            for k, v in figures.items():
                sums[k] = sums.get(k, 0.0) + v / run.n_micro
        if optimizer_step(run.model, run.optimizer, cfg.optim, out):
            in_row = 0
        else:
            in_row += 1
            log(f"[{cfg.name}] step {step + 1}: gradient norm {out.grad_norms[-1]:.3g} is not finite or >= "
                f"drop_norm {cfg.optim.drop_norm}: step skipped ({out.skipped_steps} so far)")
            if limit and in_row >= limit:
                raise FatalError(f"{cfg.name}: {in_row} steps in a row skipped (last at step {step + 1}, gradient "
                                 f"norm {out.grad_norms[-1]:.3g}); stopping without saving. Lower optim.peak_lr, "
                                 f"check the data and the initial weights; the last checkpoint is "
                                 f"{_last_checkpoint(run)}")
        if run.dp_size > 1:  # the global batch's figures, not this rank's share
            names = sorted(sums)
            loss_sum, *rest = dp_mean([loss_sum] + [sums[k] for k in names], dev)
            sums = dict(zip(names, rest))
        out.losses.append(loss_sum)
        out.figures.append(sums)
        if after_step is not None:
            after_step(step + 1, out, lr_factor)
    out.seconds = time.perf_counter() - t0
    if out.losses and len(out.losses) == out.skipped_steps - run.skipped:
        raise FatalError(f"{cfg.name}: every one of the {len(out.losses)} steps run was skipped (gradient norm not "
                         f"finite or >= drop_norm); the model did not train, so nothing is saved")
    return out


def _last_checkpoint(run: Run) -> str:
    found = ckpt.checkpoints(run.directory.path)
    return str(found[-1]) if found else "(none)"


def optimizer_step(model, optimizer, optim_cfg, result=None) -> bool:
    """AXLearn's skip-and-clip then the optimizer: returns False (and leaves parameters and optimizer state
    untouched) when the global gradient norm is not finite or is >= drop_norm. `result` (anything with
    `grad_norms` and `skipped_steps`) records the norm and the skip."""
    if hasattr(optimizer, "step_or_skip"):  # the GPU path's megatron optimizer (gpu_optim.MegatronAFM)
        norm, keep = optimizer.step_or_skip(optim_cfg)
    else:
        norm, keep = skip_or_clip_grad_norm_(model.parameters(), max_norm=optim_cfg.grad_clip,
                                             drop_norm=optim_cfg.drop_norm)
        if keep:
            optimizer.step()
    if result is not None:
        result.grad_norms.append(norm)
        result.skipped_steps += 0 if keep else 1
    return keep


def dp_mean(values: list[float], dev) -> list[float]:
    import torch.distributed as dist
    from megatron.core import parallel_state

    t = torch.tensor(values, dtype=torch.float64, device=dev)
    dist.all_reduce(t, group=parallel_state.get_data_parallel_group())
    return (t / parallel_state.get_data_parallel_world_size()).tolist()


def check_finite(run: Run, *, held_out: float | None = None) -> None:
    """Before the final save: weights and the held-out loss must be finite."""
    ckpt.require_finite(run.model.state_dict(), where=f"{run.cfg.name} after training")
    if held_out is not None and not math.isfinite(held_out):
        raise FatalError(f"{run.cfg.name}: held-out loss is {held_out} after training; not saving the model")


def save(run: Run, step: int, manifest: dict, *, tokenizer=None, files=None) -> Path:
    """A checkpoint `<out_dir>/step-NNNNNNN` with the run identity; the run must hold its directory."""
    if run.directory._lock is None and parallel.is_main():
        raise FatalError(f"{run.cfg.name}: saving after the run directory {run.directory.path} was released")
    body = dict(manifest, identity=run.directory.identity)
    return ckpt.save(Path(run.cfg.out_dir) / f"step-{step:07d}", model=run.model, optimizer=run.optimizer,
                     manifest=body, tokenizer=tokenizer, files=files)
