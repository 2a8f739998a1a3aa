"""Run configs for the tiny CPU tests (fixed seeds, few steps)."""

from __future__ import annotations

from training.config import from_dict


def tiny_cfg(root, out_dir, *, name="t", mixture="tiny-core", shape="tiny", steps=40, batch=16, lr=0.03,
             stage="core", **extra):
    raw = {
        "name": name, "stage": stage,
        "model": {"shape": shape, "vocab_size": 256},
        "data": {"mixture": mixture, "root": str(root), "valid_samples": 32},
        "optim": {"name": "afm_rmsprop", "peak_lr": lr, "warmup_steps": 5, "final_fraction": 0.005,
                  "mup_base_width": 64},
        "global_batch": batch, "micro_batch": batch, "steps": steps, "seed": 7,
        "out_dir": str(out_dir), "log_every": 0,
    }
    raw.update(extra)
    return from_dict(raw)


def quiet(*_args, **_kwargs):
    pass
