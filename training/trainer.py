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
from . import loop, parallel
from .checkpoint import load_model  # noqa: F401  (lives with the checkpoint format; imported from here too)
from .config import TrainConfig
from .data import batch_at, build_splits, valid_share_for, verify_inputs
from .loop import check_batch, optimizer_step  # noqa: F401  (optimizer_step: the one step, imported from here too)
from .losses import cross_entropies, distillation_loss, masked_mean
from .model import build_model
from .plan import RunPlan, plan_run
from .run_dir import identity as run_identity
from .run_dir import open_run


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
    """Run `cfg`; `resume` = a checkpoint dir or "auto" (newest under out_dir, of this run only); `stop_after`
    = save and stop after that many total steps (to test resumption)."""
    from .teacher import TeacherLabels

    parallel.setup(cfg.parallel, seed=cfg.seed)
    plan = plan_run(cfg)
    check_batch(cfg, parallel.data_parallel_rank_and_size()[1])
    check_memory(cfg, seq_length=plan.seq_length, log=log)
    init = ckpt.open_checkpoint(cfg.init_from) if cfg.init_from else None
    if init is not None:
        check_init_tokenizer(cfg.name, init, plan.blend.tokenizer)
    ident = run_identity(cfg.to_dict(), data=plan.blend.id, tokenizer=plan.blend.tokenizer,
                         init_weights=ckpt.weights_id(init) if init else None,
                         drop=("data.mixture", "data.blend", "init_from"))
    directory = open_run(cfg.out_dir, ident, resume=resume, name=cfg.name)
    try:
        return _train(cfg, plan, init, directory, stop_after=stop_after, log=log, teachers=TeacherLabels)
    finally:
        directory.close()


def _train(cfg: TrainConfig, plan: RunPlan, init, directory, *, stop_after, log, teachers) -> TrainResult:
    run_dir = Path(cfg.out_dir)
    cache_dir = cfg.data.cache_dir or run_dir / "data-cache"
    verify_inputs(plan.blend, stamps=Path(cache_dir) / "verified-inputs.json", log=log)
    for w, p in plan.blend.components:
        if w == 0:
            log(f"[{cfg.name}] {p}: weight 0 in {plan.blend.id}, not trained on")
    splits = build_splits(plan.blend, seq_length=plan.seq_length, seed=plan.data_seed,
                          n_train=plan.steps * cfg.global_batch, n_valid=cfg.data.valid_samples,
                          cache_dir=cache_dir, valid_share=valid_share_for(cfg.data, plan.blend))
    dev = parallel.device()
    parallel.seed_everything(cfg.seed)
    model = build_model(cfg.model, seq_length=plan.seq_length, rotary_base=cfg.rotary_base,
                        kernels=cfg.parallel.kernels, recompute=cfg.parallel.recompute,
                        bf16=dev.type == "cuda" and cfg.parallel.precision == "bf16",
                        deterministic=cfg.parallel.deterministic)
    if init is not None:
        ckpt.load_weights(init, model)
    teacher = teachers.from_config(cfg.distill, plan=plan, global_batch=cfg.global_batch,
                                   bf16=cfg.parallel.precision == "bf16") if cfg.distill else None
    # GPU: megatron's native bf16 / DDP / distributed optimizer (training/gpu_optim.py, unexecuted here);
    # the teacher is built first: its initialisation draws random numbers, and a resumed run's RNG state is
    # restored after that, as the uninterrupted run had it
    run = loop.start(cfg, model, directory, log=log)
    schedule = cfg.optim.schedule(plan.steps)
    autocast = contextlib.nullcontext  # bf16 is native (bf16 weights), not autocast over fp32 weights
    result = TrainResult(run_dir=run_dir, checkpoint=run_dir, steps=plan.steps, skipped_steps=run.skipped)
    tokens_per_step = cfg.global_batch * plan.seq_length
    end_step = min(plan.steps, stop_after) if stop_after else plan.steps
    if cfg.init_from and run.start == 0:  # where the previous stage (or pruning) left the model
        result.eval_history.append((0, evaluate(model, splits.valid, micro_batch=cfg.micro_batch,
                                                autocast=autocast)["loss"]))
        log(f"[{cfg.name}] held-out loss {result.eval_history[0][1]:.4f} at the start (from {cfg.init_from})")

    def batch_of(first: int, size: int) -> dict:
        return {k: v.to(dev) for k, v in batch_at(splits.train, first, size).items()}

    def loss_fn(m, batch):
        logits = m(batch["tokens"], batch["position_ids"], None)  # [B,S,V/tp]
        if teacher is not None:
            top1 = teacher.top1(batch, autocast=autocast)
            loss, ce = distillation_loss(logits, batch["labels"], top1, batch["loss_mask"],
                                         teacher_weight=cfg.distill.teacher_weight)
        else:
            (per_token,) = cross_entropies(logits, [batch["labels"]])
            loss = ce = masked_mean(per_token, batch["loss_mask"])
        return loss, {"ce": float(ce.detach())}

    t0 = time.perf_counter()

    def after_step(done: int, steps: loop.Steps, lr_factor: float) -> None:
        if cfg.log_every and (done % cfg.log_every == 0 or done == end_step):
            rate = (done - run.start) * tokens_per_step / (time.perf_counter() - t0)
            log(f"[{cfg.name}] step {done}/{plan.steps} loss {steps.losses[-1]:.4f} lr x{lr_factor:.3f} "
                f"grad norm {steps.grad_norms[-1]:.3g} skipped {steps.skipped_steps} "
                f"{rate:,.0f} tok/s{_mfu(cfg, plan, rate)}")
        if cfg.eval_every and done % cfg.eval_every == 0 and done != end_step:
            metrics = evaluate(model, splits.valid, micro_batch=cfg.micro_batch, autocast=autocast)
            result.eval_history.append((done, metrics["loss"]))
        if cfg.save_every and done % cfg.save_every == 0 and done != end_step:
            _save(run, plan, done, result, steps)

    steps = loop.run_steps(run, end=end_step, schedule=schedule, batch_at=batch_of, loss_fn=loss_fn, log=log,
                           after_step=after_step)
    result.losses, result.grad_norms, result.skipped_steps = steps.losses, steps.grad_norms, steps.skipped_steps
    result.label_losses = [f["ce"] for f in steps.figures]
    result.seconds = steps.seconds
    result.tokens_seen = end_step * tokens_per_step
    result.tokens_per_second = (end_step - run.start) * tokens_per_step / max(result.seconds, 1e-9)
    metrics = evaluate(model, splits.valid, micro_batch=cfg.micro_batch, autocast=autocast)
    result.eval_history.append((end_step, metrics["loss"]))
    result.eval_accuracy = metrics["accuracy"]
    log(f"[{cfg.name}] held-out loss {result.eval_loss:.4f} accuracy {result.eval_accuracy:.3f} after {end_step} steps "
        f"({result.tokens_seen:,} tokens, {result.tokens_per_second:,.0f} tok/s, {result.skipped_steps} skipped)")
    loop.check_finite(run, held_out=result.eval_loss)
    result.checkpoint = _save(run, plan, end_step, result, steps)
    return result


def check_init_tokenizer(name: str, init, tokenizer: dict | None) -> None:
    """`init_from` a checkpoint trained on another tokenizer's ids would train on ids that mean other text."""
    theirs = init.manifest.get("tokenizer")
    if tokenizer is None or theirs is None:
        return  # a hand-made blend on either side: nothing to compare
    if not ckpt.same_tokenizer(theirs, tokenizer):
        raise ConfigError(f"{name}: init_from {init.directory} was trained with tokenizer {theirs.get('name')} "
                          f"({theirs.get('kind')}, sha256 {str(theirs.get('model_sha256'))[:12]}), this run's data "
                          f"with {tokenizer.get('name')} ({tokenizer.get('kind')}, sha256 "
                          f"{str(tokenizer.get('model_sha256'))[:12]}); its ids mean other text here")


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


def _save(run, plan: RunPlan, step: int, result: TrainResult, steps) -> Path:
    cfg = run.cfg
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
        "last_loss": steps.losses[-1] if steps.losses else None,
        "skipped_steps": steps.skipped_steps,  # dropped by drop_norm; the schedule is at step - skipped
    }
    tokenizer = (plan.blend.tokenizer, plan.blend.tokenizer_file) if plan.blend.tokenizer else None
    return loop.save(run, step, manifest, tokenizer=tokenizer)
