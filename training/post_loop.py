"""What SFT, the reward model and DPO share: reading record files, the data id, the model forward with an
explicit mask, and the optimizer loop with checkpoints that resume exactly.

Step k of a run always reads items [k·global_batch, (k+1)·global_batch) (mod the epoch) of a fixed,
seeded order, so a resumed run sees exactly the data of an uninterrupted one; the optimizer, schedule,
skip-and-clip and checkpoint format are the pretraining trainer's.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from manifests.errors import ConfigError, ManifestError, RecordError

from . import checkpoint as ckpt
from . import parallel
from .optim import build_optimizer


def read_records(path: str | Path) -> list[dict]:
    """A JSON list or JSONL file, optionally gzip-compressed."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"data file {path} does not exist")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        text = f.read()
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            records = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RecordError(str(path), "-", f"not valid JSON ({exc})") from None
    else:
        records = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise RecordError(str(path), f"line {n}", f"not valid JSON ({exc})") from None
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            raise RecordError(str(path), f"record {i}", "not a JSON object")
    return records


def data_id(cfg) -> str:
    """SHA-256 over the source files' bytes (or a catalog source's content-addressed version id), their
    weights/formats/limits, the split and the template."""
    h = hashlib.sha256()
    for s in cfg.data.sources:
        if s.dataset:
            from manifests import Catalog

            h.update(Catalog(cfg.data.root).resolve(s.dataset).version_id.encode())
        else:
            h.update(hashlib.sha256(Path(s.path).read_bytes()).digest())
        h.update(json.dumps([s.weight, s.format, s.max_records]).encode())
    h.update(json.dumps([cfg.data.valid_fraction, cfg.data.seed, list(cfg.template.loss_on),
                         cfg.template.max_length, cfg.tokenizer, cfg.seq_length]).encode())
    return "post-" + h.hexdigest()[:16]


def split_and_weight(items_per_source: list[list], cfg) -> tuple[list, list]:
    """Held-out share of each source first, then the training items drawn by weight, shuffled (seeded)."""
    rng = np.random.default_rng(cfg.data.seed)
    train, valid = [], []
    for src, items in zip(cfg.data.sources, items_per_source):
        order = rng.permutation(len(items))
        n_valid = max(1, int(round(len(items) * cfg.data.valid_fraction)))
        if len(items) - n_valid < 1:
            raise ConfigError(f"{src.label}: {len(items)} usable records; too few for a held-out split")
        valid += [items[i] for i in order[:n_valid]]
        rest = [items[i] for i in order[n_valid:]]
        want = int(round(len(rest) * src.weight))
        train += [rest[i % len(rest)] for i in range(want)]
    perm = rng.permutation(len(train))
    return [train[i] for i in perm], valid


def forward(model, batch: dict) -> torch.Tensor:
    """Logits [B,S,V]: with the batch's explicit (block-diagonal causal) mask and position ids, or, for a
    THD batch (`cu_seqlens`, GPU + Transformer Engine), the micro-batch flattened to one row [1, B·S] with
    megatron's PackedSeqParams, then reshaped back."""
    if "cu_seqlens" in batch:
        from .packing import packed_seq_params

        b, s = batch["tokens"].shape
        logits = model(batch["tokens"].reshape(1, b * s), batch["position_ids"].reshape(1, b * s), None,
                       packed_seq_params=packed_seq_params(batch["cu_seqlens"]))
        return logits.reshape(b, s, -1)
    return model(batch["tokens"], batch["position_ids"], batch["attention_mask"])


def build_gpt(cfg, *, init_from: str | None = None):
    from .model import build_model

    model = build_model(cfg.model, seq_length=cfg.seq_length, rotary_base=cfg.rotary_base,
                        kernels=cfg.parallel.kernels, recompute=cfg.parallel.recompute,
                        bf16=parallel.device().type == "cuda" and cfg.parallel.precision == "bf16",
                        deterministic=cfg.parallel.deterministic)
    if init_from:
        info = ckpt.open_checkpoint(init_from)
        if info.manifest.get("model_shape", {}).get("hidden_size") not in (None, cfg.model.hidden_size):
            raise ConfigError(f"init_from {init_from}: its model shape differs from the config's {cfg.model.name}")
        _check_architecture(cfg, info)
        ckpt.load_weights(info, model)
    if getattr(cfg, "trainable_layers", 0):
        from .model.gpt import train_top_layers

        train_top_layers(model, cfg.trainable_layers)
    return model


def _check_architecture(cfg, info) -> None:
    """An init checkpoint of another architecture (qk-norm, biases, embeddings, eps, RoPE) or RoPE base would
    load without a missing tensor in some cases (eps, RoPE) and then compute another function: refuse it.
    `model: {shape: checkpoint}` in the config takes them from the checkpoint."""
    from .model.shapes import ARCH_FIELDS

    recorded = info.manifest.get("model_shape", {})
    differ = [k for k in ARCH_FIELDS if k in recorded and recorded[k] != getattr(cfg.model, k)]
    if "rotary_base" in info.manifest and float(info.manifest["rotary_base"]) != float(cfg.rotary_base):
        differ.append("rotary_base")
    if differ:
        raise ConfigError(f"{cfg.name}: init_from {info.directory} has another {', '.join(differ)} than the config; "
                          "use `model: {shape: checkpoint}` to take its architecture")


@dataclass
class LoopResult:
    run_dir: Path
    checkpoint: Path | None = None
    losses: list[float] = field(default_factory=list)
    metrics: list[dict] = field(default_factory=list)  # per step, from the loss function
    evals: list[tuple[int, dict]] = field(default_factory=list)
    skipped_steps: int = 0
    seconds: float = 0.0
    grad_norms: list[float] = field(default_factory=list)  # global gradient norm before clipping, per step
    adapter: Path | None = None  # SFT with adapter_init: the task adapter's directory


def run_loop(cfg, model, *, n_items: int, micro_batch_at: Callable[[list[int]], dict],
             loss_fn: Callable, evaluate: Callable[[], dict], data: str, resume: str | None = None,
             stop_after: int | None = None, log=print, extra_manifest: dict | None = None) -> LoopResult:
    """`micro_batch_at(indices)` -> batch; `loss_fn(model, batch)` -> (loss, {name: float});
    `evaluate()` -> held-out figures (logged and written to the manifest)."""
    from .post_plan import check_post_memory
    from .trainer import TrainResult, _dp_mean, optimizer_step

    dp_rank, dp_size = parallel.data_parallel_rank_and_size()
    if cfg.global_batch % (cfg.micro_batch * dp_size):
        raise ConfigError(f"{cfg.name}: global_batch {cfg.global_batch} must be a multiple of micro_batch "
                          f"{cfg.micro_batch} x data-parallel size {dp_size}")
    check_post_memory(cfg, log=log)
    parallel.seed_everything(cfg.seed)
    dev = parallel.device()
    # as the pretraining trainer: megatron's bf16 / DDP / distributed optimizer on GPU (training/gpu_optim.py),
    # else the model itself (torch DDP over the data-parallel group when there is more than one rank)
    megatron_path = dev.type == "cuda" and (cfg.parallel.precision == "bf16" or cfg.parallel.distributed_optimizer)
    if megatron_path:
        from .gpu_optim import wrap_for_gpu

        train_model, optimizer = wrap_for_gpu(model, cfg)
    else:
        train_model, optimizer = model, build_optimizer(model, cfg.optim)
    schedule = cfg.optim.schedule(cfg.steps)
    run_dir = Path(cfg.out_dir)
    result = LoopResult(run_dir=run_dir)
    start = 0
    info = ckpt.latest(run_dir) if resume == "auto" else (ckpt.open_checkpoint(resume) if resume else None)
    if info is not None:
        if info.manifest["data"]["source_id"] != data or info.manifest["steps_total"] != cfg.steps:
            raise ManifestError(f"{info.directory}: saved from other data or another step count "
                                f"({info.manifest['data']['source_id']}, {info.manifest['steps_total']} steps); "
                                f"this run has {data}, {cfg.steps} steps")
        ckpt.load_weights(info, model)
        ckpt.load_training_state(info, optimizer)
        start = info.step
        result.skipped_steps = int(info.manifest.get("skipped_steps", 0))
        log(f"[{cfg.name}] resumed from {info.directory} at step {start}")
    if dp_size > 1 and not megatron_path:
        from megatron.core import parallel_state

        train_model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[dev.index] if dev.type == "cuda" else None,
            process_group=parallel_state.get_data_parallel_group(),
            find_unused_parameters=bool(getattr(model, "grading", None)))  # a batch may carry no grade
    # a micro-batch of `micro_batch` items per rank; step k's global batch is items
    # [k·G, (k+1)·G) and rank r takes the r-th slice of each micro_batch·dp block, so with any dp the
    # micro-batches (and hence the mean of their losses, the gradient) are those of one rank
    n_micro = cfg.global_batch // (cfg.micro_batch * dp_size)
    end = min(cfg.steps, stop_after) if stop_after else cfg.steps
    tracker = TrainResult(run_dir=run_dir, checkpoint=run_dir, steps=cfg.steps, skipped_steps=result.skipped_steps)
    t0 = time.perf_counter()
    model.train()
    for step in range(start, end):
        lr = schedule.apply(optimizer, step - tracker.skipped_steps)
        optimizer.zero_grad(set_to_none=True)
        loss_sum, sums = 0.0, {}
        for micro in range(n_micro):
            first = step * cfg.global_batch + (micro * dp_size + dp_rank) * cfg.micro_batch
            batch = micro_batch_at([(first + j) % n_items for j in range(cfg.micro_batch)])
            sync = contextlib.nullcontext() if (dp_size == 1 or megatron_path or micro == n_micro - 1) \
                else train_model.no_sync()
            with sync:
                loss, figures = loss_fn(train_model, batch)
                (loss / n_micro).backward()
            loss_sum += float(loss.detach()) / n_micro
            for k, v in figures.items():
                sums[k] = sums.get(k, 0.0) + v / n_micro
        if not optimizer_step(model, optimizer, cfg.optim, tracker):
            log(f"[{cfg.name}] step {step + 1}: gradient norm >= drop_norm; step skipped")
        if dp_size > 1:  # the global batch's figures, not this rank's share
            names = sorted(sums)
            loss_sum, *rest = _dp_mean([loss_sum] + [sums[k] for k in names], dev)
            sums = dict(zip(names, rest))
        result.losses.append(loss_sum)
        result.metrics.append(sums)
        done = step + 1
        if cfg.log_every and (done % cfg.log_every == 0 or done == end):
            extra = " ".join(f"{k} {v:.3f}" for k, v in sums.items())
            log(f"[{cfg.name}] step {done}/{cfg.steps} loss {loss_sum:.4f} lr x{lr:.3f} {extra}")
        if cfg.save_every and done % cfg.save_every == 0 and done != end:
            _save(cfg, model, optimizer, done, result, tracker, data, extra_manifest)
    result.skipped_steps = tracker.skipped_steps
    result.grad_norms = list(tracker.grad_norms)
    result.seconds = time.perf_counter() - t0
    figures = evaluate()
    result.evals.append((end, figures))
    log(f"[{cfg.name}] held-out after {end} steps: " + " ".join(
        f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items()))
    result.checkpoint = _save(cfg, model, optimizer, end, result, tracker, data, extra_manifest)
    return result


def _save(cfg, model, optimizer, step, result, tracker, data, extra) -> Path:
    manifest = {
        "run": cfg.name, "stage": f"post-{cfg.method}", "method": cfg.method, "step": step,
        "steps_total": cfg.steps,
        "data": {"source_id": data, "sources": [asdict(s) for s in cfg.data.sources]},
        "data_position": {"items_consumed": step * cfg.global_batch, "global_batch": cfg.global_batch},
        "seed": cfg.seed, "model_shape": asdict(cfg.model), "rotary_base": cfg.rotary_base,
        "kernels": cfg.parallel.kernels, "init_from": cfg.init_from, "config": cfg.to_dict(),
        "eval": [[s, f] for s, f in result.evals], "last_loss": result.losses[-1] if result.losses else None,
        "skipped_steps": tracker.skipped_steps, **(extra or {}),
    }
    return ckpt.save(Path(cfg.out_dir) / f"step-{step:07d}", model=model, optimizer=optimizer, manifest=manifest)
