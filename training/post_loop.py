"""What SFT, the reward model and DPO share: reading record files, the data id, the model forward with an
explicit mask, and the run around training/loop.py's step loop (the one pretraining uses too).

Step k of a run always reads items [k·global_batch, (k+1)·global_batch) (mod the epoch) of a fixed,
seeded order, so a resumed run sees exactly the data of an uninterrupted one; the optimizer, schedule,
skip-and-clip, run directory and checkpoint format are the pretraining trainer's. What stays here and not
in the trainer: items are records (conversations, pairs) indexed modulo the epoch, and the loss and held-out
figures come from the recipe.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from manifests.errors import ConfigError, RecordError, ShardError

from . import checkpoint as ckpt
from . import loop, parallel
from .chat import chat_format, load_tokenizer
from .loop import check_batch
from .run_dir import identity as run_identity
from .run_dir import open_run


def read_records(path: str | Path) -> list[dict]:
    """A JSON list or JSONL file, optionally gzip-compressed."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"data file {path} does not exist")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            text = f.read()
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:   # truncated or corrupt gzip, not UTF-8
        raise ShardError(str(path), f"cannot be read ({type(exc).__name__}: {exc})") from None
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
        from .trainer import check_init_tokenizer

        info = ckpt.open_checkpoint(init_from)
        if info.manifest.get("model_shape", {}).get("hidden_size") not in (None, cfg.model.hidden_size):
            raise ConfigError(f"init_from {init_from}: its model shape differs from the config's {cfg.model.name}")
        _check_architecture(cfg, info)
        check_init_tokenizer(cfg.name, info, tokenizer_of(cfg)[0])
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


def tokenizer_of(cfg) -> tuple[dict, str | None]:
    """(entry, model file or None) of a post-training config's tokenizer, as checkpoints record it."""
    file = None if cfg.tokenizer == "bytes" else cfg.tokenizer
    return ckpt.tokenizer_entry(load_tokenizer(cfg.tokenizer).describe(), file), file


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


def open_post_run(cfg, *, data: str, resume: str | None):
    """The run directory of a post-training run (locked, identity checked: training/run_dir.py)."""
    init = ckpt.open_checkpoint(cfg.init_from) if cfg.init_from else None
    ident = run_identity(cfg.to_dict(), data=data, tokenizer=tokenizer_of(cfg)[0],
                         init_weights=ckpt.weights_id(init) if init else None,
                         drop=("data", "init_from", "tokenizer"))
    return open_run(cfg.out_dir, ident, resume=resume, name=cfg.name)


def run_loop(cfg, model, *, n_items: int, micro_batch_at: Callable[[list[int]], dict],
             loss_fn: Callable, evaluate: Callable[[], dict], data: str, resume: str | None = None,
             stop_after: int | None = None, log=print, extra_manifest: dict | None = None,
             directory=None) -> LoopResult:
    """`micro_batch_at(indices)` -> batch; `loss_fn(model, batch)` -> (loss, {name: float});
    `evaluate()` -> held-out figures (logged and written to the manifest). The steps are training/loop.py's,
    as for pretraining; item indices wrap around the epoch (`n_items`). `directory`: the run directory when
    the recipe opened it before its own work (open_post_run), else it is opened here."""
    from .post_plan import check_post_memory

    check_batch(cfg, parallel.data_parallel_rank_and_size()[1])
    if n_items < 1:
        raise ConfigError(f"{cfg.name}: no training items after reading and splitting the data; nothing to train on")
    check_post_memory(cfg, log=log)
    parallel.seed_everything(cfg.seed)
    owned = directory is None  # opened here, so released here; else the caller releases it
    directory = directory or open_post_run(cfg, data=data, resume=resume)
    try:
        run = loop.start(cfg, model, directory, log=log,
                         find_unused=bool(getattr(model, "grading", None)))  # a batch may carry no grade
        # each post-training checkpoint records its chat format (checkpoint.load_checkpoint_tokenizer)
        extra = {"template": chat_format(load_tokenizer(cfg.tokenizer)).name, **(extra_manifest or {})}
        return _run(cfg, run, n_items=n_items, micro_batch_at=micro_batch_at, loss_fn=loss_fn, evaluate=evaluate,
                    data=data, stop_after=stop_after, log=log, extra=extra)
    finally:
        if owned:
            directory.close()


def _run(cfg, run, *, n_items, micro_batch_at, loss_fn, evaluate, data, stop_after, log, extra) -> LoopResult:
    result = LoopResult(run_dir=Path(cfg.out_dir))
    end = min(cfg.steps, stop_after) if stop_after else cfg.steps

    def after_step(done: int, steps: loop.Steps, lr: float) -> None:
        if cfg.log_every and (done % cfg.log_every == 0 or done == end):
            figures = " ".join(f"{k} {v:.3f}" for k, v in steps.figures[-1].items())
            log(f"[{cfg.name}] step {done}/{cfg.steps} loss {steps.losses[-1]:.4f} lr x{lr:.3f} {figures}")
        if cfg.save_every and done % cfg.save_every == 0 and done != end:
            _save(cfg, run, done, result, steps, data, extra)

    # steps 0 (an RM's probed head alone) runs no step, so its schedule is never read
    steps = loop.run_steps(run, end=end, schedule=cfg.optim.schedule(max(cfg.steps, 1)), loss_fn=loss_fn, log=log,
                           batch_at=lambda first, size: micro_batch_at([(first + j) % n_items for j in range(size)]),
                           after_step=after_step)
    result.losses, result.metrics, result.grad_norms = steps.losses, steps.figures, list(steps.grad_norms)
    result.skipped_steps, result.seconds = steps.skipped_steps, steps.seconds
    figures = evaluate()
    result.evals.append((end, figures))
    log(f"[{cfg.name}] held-out after {end} steps: " + " ".join(
        f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items()))
    loop.check_finite(run, held_out=figures.get("loss"))
    result.checkpoint = _save(cfg, run, end, result, steps, data, extra)
    return result


def _save(cfg, run, step, result, steps, data, extra) -> Path:
    manifest = {
        "run": cfg.name, "stage": f"post-{cfg.method}", "method": cfg.method, "step": step,
        "steps_total": cfg.steps,
        "data": {"source_id": data, "sources": [asdict(s) for s in cfg.data.sources]},
        "data_position": {"items_consumed": step * cfg.global_batch, "global_batch": cfg.global_batch},
        "seed": cfg.seed, "model_shape": asdict(cfg.model), "rotary_base": cfg.rotary_base,
        "kernels": cfg.parallel.kernels, "init_from": cfg.init_from, "config": cfg.to_dict(),
        "eval": [[s, f] for s, f in result.evals], "last_loss": steps.losses[-1] if steps.losses else None,
        "skipped_steps": steps.skipped_steps, **(extra or {}),
    }
    return loop.save(run, step, manifest, tokenizer=tokenizer_of(cfg))
