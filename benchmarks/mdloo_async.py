"""MDLOO iterations with rollouts and updates decoupled (producer thread, max_staleness 1) against the same
iterations run in turn (max_staleness 0, the on-policy peer), from one random-init tiny checkpoint, same
prompts and settings. Prints the seconds of each loop and the ratio. CPU: the overlap is what two threads
can get from torch ops that release the GIL; on a busy machine the numbers move a lot, so it runs each twice.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/mdloo_async.py [--iterations 6]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--iterations", type=int, default=6)
    args = p.parse_args()
    from training import checkpoint as ckpt
    from training import parallel
    from training.mdloo_config import from_raw
    from training.mdloo_demo import configs
    from training.post_loop import build_gpt
    from training.rl_loop import train_mdloo

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _, raw = configs(tmp, iterations=args.iterations, eval_prompts=4)
        raw["init_from"] = str(tmp / "init")
        run = from_raw(raw, where="benchmark")
        parallel.setup(run.post.parallel, seed=3)
        ckpt.save(tmp / "init", model=build_gpt(run.post), manifest={"step": 0, "model_shape": {"hidden_size": 64}})
        times = {0: [], 1: []}
        for rep in range(2):
            for s in (0, 1):
                r = from_raw({**raw, "out_dir": str(tmp / f"run-{s}-{rep}"),
                              "mdloo": {**raw["mdloo"], "max_staleness": s}}, where="benchmark")
                t0 = time.perf_counter()
                res = train_mdloo(r, log=lambda *_: None)
                times[s].append(res.seconds)
                print(f"max_staleness {s} (run {rep + 1}): {res.seconds:.1f} s for {args.iterations} iterations "
                      f"({time.perf_counter() - t0:.1f} s with held-out evals and checkpoint)")
        sync, asyn = min(times[0]), min(times[1])
        print(f"in turn (peer) {sync:.1f} s, decoupled {asyn:.1f} s: decoupled/in-turn time ratio {asyn / sync:.2f} "
              f"(best of 2 each; {args.iterations} iterations of 16 prompts x 8 responses, 8 inner steps)")


if __name__ == "__main__":
    main()
