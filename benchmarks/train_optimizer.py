"""AFM RMSProp-with-momentum (training/optim) vs torch.optim.AdamW, in one process on the same data.

1. Optimizer step time on the same parameters and gradients (a 3072x3072 block-sized stack, float32).
2. Held-out loss of the tiny model after the same number of steps on the byte-level tiny-core mixture
   (bundled C4), each optimizer at its best rate from a small sweep. Both use the same global-norm clip (1.0)
   and drop-norm (100) in front, as AXLearn's learner does; the AFM optimizer clips each block's raw update
   to RMS 1, so its per-entry step is about the rate at any width and its sweep sits near the report's 0.01.

    .venv/bin/python benchmarks/train_optimizer.py [--steps 100]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from training.byte_mixture import bundled_c4_texts, publish_tiny_mixtures  # noqa: E402
from training.config import from_dict  # noqa: E402
from training.optim import AFMRMSPropMomentum  # noqa: E402
from training.trainer import train  # noqa: E402


def step_time(opt_factory, params, grads, repeats=3) -> float:
    """Best of `repeats` timed steps (the machine is shared: the minimum is the least disturbed)."""
    opt = opt_factory(params)
    for p, g in zip(params, grads):
        p.grad = g
    opt.step()  # state allocation
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(3072, 1024)) for _ in range(6)]  # 18.9M parameters
    grads = [torch.randn_like(p) * 1e-3 for p in params]
    t_afm = t_adamw = float("inf")
    for _ in range(3):  # interleaved rounds, so both see the same background load
        t_afm = min(t_afm, step_time(lambda ps: AFMRMSPropMomentum([{"params": ps, "weight_decay": 1e-4}], lr=1e-2),
                                     params, grads))
        t_adamw = min(t_adamw, step_time(lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=1e-4), params, grads))
    print(f"optimizer step, 18.9M params (torch foreach kernels, {torch.get_num_threads()} threads): AFM {t_afm * 1e3:.1f} ms, AdamW {t_adamw * 1e3:.1f} ms, "
          f"ratio AFM/AdamW {t_afm / t_adamw:.2f}")

    with tempfile.TemporaryDirectory() as root:
        publish_tiny_mixtures(root, bundled_c4_texts())
        results = {}
        for name, lrs in (("afm_rmsprop", (3e-3, 1e-2, 3e-2)), ("adamw", (3e-3, 1e-2, 3e-2))):
            for lr in lrs:
                cfg = from_dict({
                    "name": f"{name}-{lr}", "model": {"shape": "tiny", "vocab_size": 256},
                    "data": {"mixture": "tiny-core", "root": root, "valid_samples": 64},
                    "optim": {"name": name, "peak_lr": lr, "warmup_steps": 10, "mup_base_width": 64},
                    "global_batch": 16, "micro_batch": 16, "steps": args.steps, "seed": 1,
                    "out_dir": f"{root}/runs/{name}-{lr}", "log_every": 0})
                r = train(cfg, log=lambda *_: None)
                results[(name, lr)] = r.eval_loss
                print(f"{name:12} peak lr {lr:<6} held-out loss {r.eval_loss:.4f} ({r.tokens_per_second:,.0f} tok/s)")
        best = {n: min((v, lr) for (m, lr), v in results.items() if m == n) for n in ("afm_rmsprop", "adamw")}
        print(f"best after {args.steps} steps: AFM {best['afm_rmsprop'][0]:.4f} (lr {best['afm_rmsprop'][1]}), "
              f"AdamW {best['adamw'][0]:.4f} (lr {best['adamw'][1]}), difference AFM-AdamW "
              f"{best['afm_rmsprop'][0] - best['adamw'][0]:+.4f} nats/byte")
    return 0


if __name__ == "__main__":
    sys.exit(main())
