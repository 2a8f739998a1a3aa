"""MDLOO demo at tiny shapes on CPU: a verifiable task (single-digit addition, answers checked), a brief SFT
warm start so that some sampled answers are right, then a few MDLOO iterations that print the mean reward
and the KL to the reference per iteration, and write the reward curve as a PNG. `run(root)` is what the demo
calls; well under a minute on one CPU core.

The task data are generated (seeded) into the run folder: SFT conversations "a+b" -> "a+b's value", and
prompts with their answers, a share of them held out and answered greedily before and after MDLOO.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

OPTIM = {"weight_decay": 0.0, "warmup_steps": 2, "final_fraction": 0.1, "mup_base_width": 64}


def _write(path: Path, records: list[dict]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def configs(out: Path, *, sft_steps: int = 80, iterations: int = 12, peak_lr: float = 1e-3, high: int = 4,
            **mdloo) -> tuple[dict, dict]:
    from .rl_tasks import addition_records

    sft_data = _write(out / "data" / "addition-sft.jsonl", addition_records(600, seed=1, with_answer=True, high=high))
    prompts = _write(out / "data" / "addition-prompts.jsonl", addition_records(400, seed=2, with_answer=False, high=high))
    common = {"model": {"shape": "tiny", "vocab_size": 256}, "tokenizer": "bytes", "seed": 1234, "log_every": 0}
    sft = {**common, "name": "mdloo-demo-sft", "method": "sft", "seq_length": 256, "global_batch": 8,
           "micro_batch": 8, "steps": sft_steps, "out_dir": str(out / "sft"),
           "data": {"sources": [{"path": sft_data}], "valid_fraction": 0.1},
           "optim": {**OPTIM, "name": "afm_rmsprop", "peak_lr": 0.02}}
    rl = {**common, "name": "mdloo-demo", "method": "mdloo", "seq_length": 64, "global_batch": 128,
          "micro_batch": 128, "steps": iterations, "out_dir": str(out / "mdloo"), "init_from": str(out / "sft"),
          "data": {"sources": [{"path": prompts}], "valid_fraction": 0.15},
          "optim": {**OPTIM, "name": "adamw", "peak_lr": peak_lr, "warmup_steps": 0, "final_fraction": 1.0},
          "mdloo": {"prompts_per_iteration": 16, "responses_per_prompt": 8, "inner_steps": 4, "kl_coef": 0.05,
                    "trust_region": 1.0, "max_staleness": 1, "max_new_tokens": 10, "eval_prompts": 60, **mdloo}}
    return sft, rl


def run(root: str, *, quiet: bool = True, generate_fn=None, **mdloo) -> dict:
    from .mdloo_config import from_raw
    from .post_config import from_dict
    from .rl_loop import train_mdloo
    from .sft import train_sft

    log = (lambda *_: None) if quiet else print
    out = Path(root) / ".runs" / "mdloo-demo"
    t0 = time.perf_counter()
    sft_raw, rl_raw = configs(out, **mdloo)
    sft = train_sft(from_dict(sft_raw), log=log)
    print(f"SFT warm start (single-digit addition, {sft_raw['steps']} steps): held-out CE "
          f"{sft.evals[0][1]['loss']:.3f} -> {sft.evals[-1][1]['loss']:.3f} nats/byte ({time.perf_counter() - t0:.0f} s)")
    t1 = time.perf_counter()
    result = train_mdloo(from_raw(rl_raw, where="mdloo demo"), generate_fn=generate_fn, log=log)
    print(f"MDLOO ({rl_raw['mdloo']['prompts_per_iteration']} prompts x {rl_raw['mdloo']['responses_per_prompt']} "
          f"responses, {rl_raw['mdloo']['inner_steps']} mirror-descent steps per iteration, rollouts up to "
          f"{rl_raw['mdloo']['max_staleness']} version(s) stale):")
    print("  iter  reward  KL(ref) seq k1  KL(ref)/token exact  trust KL  staleness")
    for h in result.history:
        exact = h.get("kl_ref_exact_per_token", float("nan"))
        print(f"  {h['iteration']:4d}  {h['reward']:6.3f}  {h['kl_ref']:14.4f}  {exact:19.4f}"
              f"  {h['trust_kl_last']:8.4f}  {h['staleness']:9d}")
    first, last = result.held_out[0][1], result.held_out[-1][1]
    half = max(1, len(result.history) // 3)
    early = sum(h["reward"] for h in result.history[:half]) / half
    late = sum(h["reward"] for h in result.history[-half:]) / half
    print(f"  mean sampled reward, first {half} vs last {half} iterations: {early:.3f} -> {late:.3f}; held-out "
          f"greedy accuracy {first['accuracy']:.3f} -> {last['accuracy']:.3f} over {last['prompts']} prompts")
    print(f"  reward curve: {result.plot} ({time.perf_counter() - t1:.0f} s; demo {time.perf_counter() - t0:.0f} s)")
    return {"history": result.history, "held_out": result.held_out, "early": early, "late": late,
            "plot": str(result.plot), "checkpoint": str(result.checkpoint)}


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--root", default="data/root")
    run(p.parse_args().root, quiet=False)
