"""`make demo` step: palettize the tiny model to 3.6 bits per weight and train an accuracy-recovery adapter.

Uses the train demo's checkpoint (`<root>/.runs/demo-tiny-core`) when it exists; otherwise trains the tiny
model for 150 steps on the byte-level tiny-core mixture of the bundled C4 sample first. Writes the palettized
model to `<root>/.runs/demo-palettized` and the adapter to `<root>/.runs/demo-palettized/adapters/recovery-r16`.
Then trains a task adapter from the recovery adapter on SFT conversations (`train sft --adapter-init`), written
to `<root>/.runs/demo-palettized/task-sft/adapter`.
"""

from __future__ import annotations

import time
from pathlib import Path


def _checkpoint(root: Path, log) -> Path:
    from .. import checkpoint as ckpt

    found = ckpt.latest(root / ".runs" / "demo-tiny-core")
    if found is not None:
        return found.directory
    from ..byte_mixture import bundled_c4_texts, publish_tiny_mixtures
    from ..config import from_dict
    from ..trainer import train

    from manifests.catalog import Catalog

    if "tiny-core" not in Catalog(str(root)).names():
        publish_tiny_mixtures(root, bundled_c4_texts())
    log("quantize demo: no train-demo checkpoint; training the tiny model for 150 steps on tiny-core first")
    cfg = from_dict({
        "name": "demo-quantize-base", "stage": "core", "model": {"shape": "tiny", "vocab_size": 256},
        "data": {"mixture": "tiny-core", "root": str(root), "valid_samples": 32},
        "optim": {"name": "afm_rmsprop", "peak_lr": 0.03, "warmup_steps": 5, "final_fraction": 0.005,
                  "mup_base_width": 64},
        "global_batch": 16, "micro_batch": 16, "steps": 150, "seed": 7,
        "out_dir": str(root / ".runs" / "demo-quantize-base"), "log_every": 0})
    return train(cfg, log=lambda *a, **k: None).checkpoint


def run(root: str, *, bpw: float = 3.6, rank: int = 16, lora_steps: int = 30, task_steps: int = 20,
        log=print) -> dict:
    from .. import checkpoint as ckpt
    from .. import parallel
    from ..adapters.lora import LoraConfig
    from ..adapters.recovery import RecoveryConfig, recovered_share, train_batches, train_recovery
    from ..adapters.store import base_id, save_adapter
    from ..trainer import load_model
    from .evalset import eval_set, mean_loss
    from .palettize import PalettizeConfig, dequantized_state, load_palettized, palettize_checkpoint

    start = time.perf_counter()
    root_path = Path(root)
    source = _checkpoint(root_path, log)
    out = root_path / ".runs" / "demo-palettized"
    palettize_checkpoint(source, out, PalettizeConfig(bpw=bpw), log=log)
    info = ckpt.open_checkpoint(source)
    parallel.setup(parallel.ParallelConfig())
    data = eval_set(info, cache_dir=out / ".data-cache", valid_samples=32)
    float_model, _ = load_model(source, seq_length=data.seq_length)
    float_loss = mean_loss(float_model, data.valid)
    model, manifest = load_palettized(out)
    quant_loss = mean_loss(model, data.valid)
    state = {k: v for k, v in float_model.state_dict().items() if k in manifest["layers"]}
    deq = dequantized_state(out)
    residual = {k: state[k] - deq[k] for k in deq if ".linear_" in k}
    batches = train_batches(info.manifest, n=16 * lora_steps, batch=16, cache_dir=out / ".data-cache")
    adapter, host, losses = train_recovery(model, batches, RecoveryConfig(
        lora=LoraConfig(rank=rank, init="svd"), steps=lora_steps), residual=residual, log=None)
    adapted_loss = mean_loss(model, data.valid)
    host.detach()
    save_adapter(out / "adapters" / f"recovery-r{rank}", adapter, base=base_id(out),
                 extra={"steps": lora_steps, "data": info.manifest["data"]["source_id"], "train_losses": losses})
    share = recovered_share(float_loss=float_loss, quant_loss=quant_loss, adapted_loss=adapted_loss)
    gap = (f"gap recovered {share:.0%}; part of it is continued training of an unconverged tiny model"
           if share == share else "palettization cost no held-out loss here: no gap to recover")
    log(f"held-out loss: float {float_loss:.4f}, palettized {manifest['bpw_palettized']:.2f} bpw {quant_loss:.4f}, "
        f"+ recovery LoRA r{rank} ({lora_steps} steps) {adapted_loss:.4f} ({gap}) "
        f"({time.perf_counter() - start:.0f} s)")
    result = {"float": float_loss, "quantized": quant_loss, "adapted": adapted_loss, "bpw": manifest["bpw_palettized"]}
    if task_steps:
        result["task"] = _task_adapter(root_path, out / "adapters" / f"recovery-r{rank}", info, task_steps, log)
    return result


def _task_adapter(root: Path, recovery: Path, info, steps: int, log) -> tuple[float, float]:
    """`train sft --adapter-init RECOVERY`: a task adapter on the LLaMA-Factory demo conversations, from a copy
    of the recovery adapter, on the frozen palettized base; the base's shape and tokenizer (bytes, or the BPE
    the train demo's mixture names) come from its checkpoint."""
    from ..checkpoint import checkpoint_tokenizer
    from ..post_config import from_dict
    from ..sft import train_sft

    shape = info.manifest["model_shape"]
    tok = checkpoint_tokenizer(info)
    tokenizer = "bytes" if tok.get("kind") == "bytes" else str(tok["model_file"])

    t0 = time.perf_counter()
    conversations = Path(__file__).resolve().parents[2] / "data/samples/preference/llamafactory/kto_en_demo.json.gz"
    cfg = from_dict({
        "name": "demo-task-adapter", "method": "sft", "model": {"shape": shape["name"], "vocab_size": shape["vocab_size"]},
        "tokenizer": tokenizer, "seq_length": 256, "global_batch": 8, "micro_batch": 8, "steps": steps, "seed": 3,
        "log_every": 0, "out_dir": str(root / ".runs" / "demo-palettized" / "task-sft"), "adapter_init": str(recovery),
        "data": {"sources": [{"path": str(conversations)}], "valid_fraction": 0.1},
        "optim": {"name": "adamw", "peak_lr": 2e-2, "weight_decay": 0.0, "warmup_steps": 2, "final_fraction": 0.1}})
    run = train_sft(cfg, log=lambda *a, **k: None)
    before, after = run.evals[0][1]["loss"], run.evals[-1][1]["loss"]
    log(f"task adapter from the recovery adapter (SFT, LoRA only, base frozen, {steps} steps): held-out SFT loss "
        f"{before:.4f} -> {after:.4f}; written to {run.adapter} ({time.perf_counter() - t0:.0f} s)")
    return before, after
