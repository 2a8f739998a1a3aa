"""The training loop shared by every recipe (pretraining stages, distillation, pruned-student training).

One optimizer step = `global_batch` sequences = (global_batch / (micro_batch · dp)) micro-batches per rank,
gradients accumulated, global-norm clipped, then the optimizer (AFM RMSProp-momentum or AdamW) with the
warm-up + cosine schedule. Step k always reads samples [k·global_batch, (k+1)·global_batch) of the blend's
deterministic order, so a resumed run sees exactly the data of an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from manifests.errors import ConfigError

from . import checkpoint as ckpt
from .checkpoint import load_model  # noqa: F401  (lives with the checkpoint format; imported from here too)
from . import parallel
from .config import TrainConfig
from .data import batch_at, build_splits, valid_share_for
from .losses import cross_entropies, distillation_loss, masked_mean
from .model import build_model
from .optim import build_optimizer, skip_or_clip_grad_norm_
from .plan import RunPlan, plan_run


@dataclass
class TrainResult:
    run_dir: Path
    checkpoint: Path
    steps: int
    losses: list[float] = field(default_factory=list)  # training objective, one per step run here
    label_losses: list[float] = field(default_factory=list)  # cross-entropy against the true labels
    eval_history: list[tuple[int, float]] = field(default_factory=list)  # (step, held-out label CE)
    eval_accuracy: float = float("nan")  # held-out next-token accuracy at the end
    grad_norms: list[float] = field(default_factory=list)  # global gradient norm before clipping, per step
    skipped_steps: int = 0  # steps dropped whole because the gradient norm was >= drop_norm (or not finite)
    tokens_seen: int = 0
    seconds: float = 0.0
    tokens_per_second: float = 0.0

    @property
    def eval_loss(self) -> float:
        return self.eval_history[-1][1]


@torch.no_grad()
def evaluate(model, dataset, *, micro_batch: int, autocast=contextlib.nullcontext) -> dict[str, float]:
    """Over the whole held-out split, token-weighted: `loss` = cross-entropy against the true labels,
    `accuracy` = how often the argmax is the true next token."""
    model.eval()
    total, correct, count = 0.0, 0.0, 0.0
    for start in range(0, len(dataset), micro_batch):
        size = min(micro_batch, len(dataset) - start)
        batch = {k: v.to(parallel.device()) for k, v in batch_at(dataset, start, size).items()}
        with autocast():
            logits = model(batch["tokens"], batch["position_ids"], None)
        (ce,) = cross_entropies(logits, [batch["labels"]])
        mask = batch["loss_mask"]
        total += float((ce * mask).sum())
        count += float(mask.sum())
        if logits.shape[-1] == model.vocab_size:  # accuracy needs the whole vocabulary on this rank
            correct += float(((logits.argmax(-1) == batch["labels"]) * mask).sum())
        else:
            correct = float("nan")
    model.train()
    return {"loss": total / max(count, 1.0), "accuracy": correct / max(count, 1.0)}


def train(cfg: TrainConfig, *, resume: str | Path | None = None, stop_after: int | None = None,
          log=print) -> TrainResult:
    """Run `cfg`; `resume` = a checkpoint dir or "auto" (newest under out_dir); `stop_after` = save and
    stop after that many total steps (to test resumption)."""
    from .teacher import TeacherLabels

    parallel.setup(cfg.parallel, seed=cfg.seed)
    plan = plan_run(cfg)
    dev = parallel.device()
    dp_rank, dp_size = parallel.data_parallel_rank_and_size()
    if cfg.global_batch % (cfg.micro_batch * dp_size):
        raise ConfigError(f"{cfg.name}: global_batch {cfg.global_batch} must be a multiple of micro_batch "
                          f"{cfg.micro_batch} x data-parallel size {dp_size}")
    n_micro = cfg.global_batch // (cfg.micro_batch * dp_size)
    check_memory(cfg, seq_length=plan.seq_length, log=log)
    run_dir = Path(cfg.out_dir)
    splits = build_splits(plan.blend, seq_length=plan.seq_length, seed=plan.data_seed,
                          n_train=plan.steps * cfg.global_batch, n_valid=cfg.data.valid_samples,
                          cache_dir=cfg.data.cache_dir or run_dir / "data-cache",
                          valid_share=valid_share_for(cfg.data, plan.blend))

    parallel.seed_everything(cfg.seed)
    model = build_model(cfg.model, seq_length=plan.seq_length, rotary_base=cfg.rotary_base,
                        kernels=cfg.parallel.kernels, recompute=cfg.parallel.recompute,
                        bf16=dev.type == "cuda" and cfg.parallel.precision == "bf16",
                        deterministic=cfg.parallel.deterministic)
    if cfg.init_from:
        ckpt.load_weights(ckpt.open_checkpoint(cfg.init_from), model)
    # GPU: megatron's native bf16 / DDP / distributed optimizer (training/gpu_optim.py, unexecuted here);
    # CPU, or fp32 without sharding: the model as built, torch DDP and the optimizer directly
    megatron_path = dev.type == "cuda" and (cfg.parallel.precision == "bf16" or cfg.parallel.distributed_optimizer)
    if megatron_path:
        from .gpu_optim import wrap_for_gpu

        train_model, optimizer = wrap_for_gpu(model, cfg)
    else:
        train_model, optimizer = model, build_optimizer(model, cfg.optim)
    schedule = cfg.optim.schedule(plan.steps)
    teacher = TeacherLabels.from_config(cfg.distill, plan=plan, global_batch=cfg.global_batch,
                                        bf16=cfg.parallel.precision == "bf16") if cfg.distill else None

    start_step = 0
    result_skipped = 0
    info = ckpt.latest(run_dir) if resume == "auto" else (ckpt.open_checkpoint(resume) if resume else None)
    if info is not None:
        if info.manifest["data"]["source_id"] != plan.blend.id or info.manifest["steps_total"] != plan.steps:
            raise ConfigError(f"{info.directory}: saved from other data or another step count "
                              f"({info.manifest['data']['source_id']}, {info.manifest['steps_total']} steps); "
                              f"this run has {plan.blend.id}, {plan.steps} steps")
        ckpt.load_weights(info, model)
        ckpt.load_training_state(info, optimizer)
        start_step = info.step
        result_skipped = int(info.manifest.get("skipped_steps", 0))
        log(f"[{cfg.name}] resumed from {info.directory} at step {start_step}")

    if dp_size > 1 and not megatron_path:
        from megatron.core import parallel_state

        train_model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[dev.index] if dev.type == "cuda" else None,
            process_group=parallel_state.get_data_parallel_group())
    autocast = contextlib.nullcontext  # bf16 is native (bf16 weights), not autocast over fp32 weights

    result = TrainResult(run_dir=run_dir, checkpoint=run_dir, steps=plan.steps, skipped_steps=result_skipped)
    tokens_per_step = cfg.global_batch * plan.seq_length
    end_step = min(plan.steps, stop_after) if stop_after else plan.steps
    if cfg.init_from and start_step == 0:  # where the previous stage (or pruning) left the model
        result.eval_history.append((0, evaluate(model, splits.valid, micro_batch=cfg.micro_batch,
                                                autocast=autocast)["loss"]))
        log(f"[{cfg.name}] held-out loss {result.eval_history[0][1]:.4f} at the start (from {cfg.init_from})")
    t0 = time.perf_counter()
    model.train()
    for step in range(start_step, end_step):
        # as in AXLearn, a dropped step does not advance the schedule (its count lives in the optimizer state)
        lr_factor = schedule.apply(optimizer, step - result.skipped_steps)
        optimizer.zero_grad(set_to_none=True)
        loss_sum = ce_sum = 0.0
        for micro in range(n_micro):
            first = step * cfg.global_batch + micro * cfg.micro_batch * dp_size
            batch = {k: v.to(dev) for k, v in batch_at(splits.train, first, cfg.micro_batch * dp_size,
                                                       dp_rank=dp_rank, dp_size=dp_size).items()}
            sync = contextlib.nullcontext() if (dp_size == 1 or micro == n_micro - 1) else train_model.no_sync()
            with sync:
                with autocast():
                    logits = train_model(batch["tokens"], batch["position_ids"], None)  # [B,S,V/tp]
                if teacher is not None:
                    top1 = teacher.top1(batch, autocast=autocast)
                    loss, ce = distillation_loss(logits, batch["labels"], top1, batch["loss_mask"],
                                                 teacher_weight=cfg.distill.teacher_weight)
                else:
                    (per_token,) = cross_entropies(logits, [batch["labels"]])
                    loss = ce = masked_mean(per_token, batch["loss_mask"])
                (loss / n_micro).backward()
            loss_sum += float(loss.detach()) / n_micro
            ce_sum += float(ce.detach()) / n_micro
        if not optimizer_step(model, optimizer, cfg.optim, result):
            log(f"[{cfg.name}] step {step + 1}: gradient norm {result.grad_norms[-1]:.3g} >= drop_norm "
                f"{cfg.optim.drop_norm}: step skipped ({result.skipped_steps} so far)")
        if dp_size > 1:  # log the global batch's loss, not this rank's share
            loss_sum, ce_sum = _dp_mean([loss_sum, ce_sum], dev)
        result.losses.append(loss_sum)
        result.label_losses.append(ce_sum)
        done = step + 1
        if cfg.log_every and (done % cfg.log_every == 0 or done == end_step):
            rate = (done - start_step) * tokens_per_step / (time.perf_counter() - t0)
            log(f"[{cfg.name}] step {done}/{plan.steps} loss {loss_sum:.4f} lr x{lr_factor:.3f} "
                f"grad norm {result.grad_norms[-1]:.3g} skipped {result.skipped_steps} "
                f"{rate:,.0f} tok/s{_mfu(cfg, plan, rate)}")
        if cfg.eval_every and done % cfg.eval_every == 0 and done != end_step:
            metrics = evaluate(model, splits.valid, micro_batch=cfg.micro_batch, autocast=autocast)
            result.eval_history.append((done, metrics["loss"]))
        if cfg.save_every and done % cfg.save_every == 0 and done != end_step:
            _save(cfg, plan, model, optimizer, done, result)
    result.seconds = time.perf_counter() - t0
    result.tokens_seen = end_step * tokens_per_step
    result.tokens_per_second = (end_step - start_step) * tokens_per_step / max(result.seconds, 1e-9)
    metrics = evaluate(model, splits.valid, micro_batch=cfg.micro_batch, autocast=autocast)
    result.eval_history.append((end_step, metrics["loss"]))
    result.eval_accuracy = metrics["accuracy"]
    log(f"[{cfg.name}] held-out loss {result.eval_loss:.4f} accuracy {result.eval_accuracy:.3f} after {end_step} steps "
        f"({result.tokens_seen:,} tokens, {result.tokens_per_second:,.0f} tok/s, {result.skipped_steps} skipped)")
    result.checkpoint = _save(cfg, plan, model, optimizer, end_step, result)
    return result


def check_memory(cfg: TrainConfig, *, seq_length: int, log=print) -> None:
    """Refuse to start a run that the memory plan says cannot fit: against parallel.gpu_memory when set,
    else the GPU's own memory; nothing to check on a CPU run without a budget."""
    import torch.distributed as dist

    from manifests.config import parse_size

    from .memory import plan_for_config

    budget = parse_size(cfg.parallel.gpu_memory, key="parallel.gpu_memory", where=cfg.name) if cfg.parallel.gpu_memory else None
    if budget is None and torch.cuda.is_available():
        budget = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    if budget is None:
        return
    gpus = dist.get_world_size() if dist.is_initialized() else 1
    mem = plan_for_config(cfg, gpus=gpus, gpu_bytes=budget, seq_length=seq_length)
    if not mem.fits:
        raise ConfigError(f"{cfg.name}: the memory plan says this run does not fit; not starting.\n{mem.table()}\n"
                          "Lower micro_batch, set parallel.recompute (selective/full), parallel.precision bf16, "
                          "parallel.distributed_optimizer, or more tensor parallelism.")
    log(f"[{cfg.name}] memory plan: {mem.total / 2**30:.1f} of {budget / 2**30:.1f} GiB per GPU "
        f"(largest micro-batch {mem.largest_micro_batch})")


def optimizer_step(model, optimizer, optim_cfg, result: TrainResult | None = None) -> bool:
    """AXLearn's skip-and-clip then the optimizer: returns False (and leaves parameters and optimizer state
    untouched) when the global gradient norm is not finite or is >= drop_norm. Shared by every recipe."""
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


def _dp_mean(values: list[float], dev) -> list[float]:
    import torch.distributed as dist
    from megatron.core import parallel_state

    t = torch.tensor(values, dtype=torch.float64, device=dev)
    dist.all_reduce(t, group=parallel_state.get_data_parallel_group())
    return (t / parallel_state.get_data_parallel_world_size()).tolist()


def _mfu(cfg: TrainConfig, plan: RunPlan, tokens_per_second: float) -> str:
    """Model FLOPs utilisation on GPU: (6·N + 12·L·h·S) FLOPs per token (weights + attention scores)
    over the peak of all GPUs; the peak per GPU is CIDERMILL_PEAK_TFLOPS (default 989, H100 dense bf16)."""
    if not torch.cuda.is_available():
        return ""
    import os

    import torch.distributed as dist

    m = cfg.model
    per_token = 6 * m.parameter_count()["non_embedding"] + 6 * m.vocab_size * m.hidden_size \
        + 12 * m.num_layers * m.num_attention_heads * m.head_dim * plan.seq_length
    peak = float(os.environ.get("CIDERMILL_PEAK_TFLOPS", 989)) * 1e12 * dist.get_world_size()
    return f" MFU {per_token * tokens_per_second / peak:.1%}"


def _save(cfg: TrainConfig, plan: RunPlan, model, optimizer, step: int, result: TrainResult) -> Path:
    manifest = {
        "run": cfg.name,
        "stage": cfg.stage,
        "step": step,
        "steps_total": plan.steps,
        "tokens_seen": step * cfg.global_batch * plan.seq_length,
        "data": {"source_id": plan.blend.id, "blend": plan.blend.megatron_blend(), "seed": plan.data_seed,
                 "seq_length": plan.seq_length, "vocab_size": plan.blend.vocab_size, "eod_id": plan.blend.eod_id},
        "data_position": {"samples_consumed": step * cfg.global_batch, "global_batch": cfg.global_batch},
        "seed": cfg.seed,
        "rng": "optim/rank-*.pt holds torch CPU/CUDA, megatron RNG-tracker, Python and numpy generator states",
        "deterministic": cfg.parallel.deterministic,
        "model_shape": asdict(cfg.model),
        "rotary_base": cfg.rotary_base,
        "kernels": cfg.parallel.kernels,
        "init_from": cfg.init_from,
        "config": cfg.to_dict(),
        "eval": [list(e) for e in result.eval_history],
        "eval_accuracy": None if math.isnan(result.eval_accuracy) else result.eval_accuracy,  # nan: tp > 1
        "last_loss": result.losses[-1] if result.losses else None,
        "skipped_steps": result.skipped_steps,  # dropped by drop_norm; the schedule is at step - skipped
    }
    return ckpt.save(Path(cfg.out_dir) / f"step-{step:07d}", model=model, optimizer=optimizer, manifest=manifest)
