"""iTeC demo at tiny shapes on data shipped in data/samples: `run(root)` for `make demo`.

1. members: a tiny SFT model (LLaMA-Factory demo conversations + the first 32 GSM8K seed problems written as
   chat, answers ending "The answer is N."), a DPO model from it (LLaMA-Factory pairs), and a reward model
   from it (hh-rlhf + AlpacaEval pairs), as in training/post_demo.py but shorter;
2. iTeC: the committee {sft, dpo} samples 2 responses to each of 40 prompts (the other 32 GSM8K problems:
   math reward by answer equivalence + RM; LLaMA-Factory prompts: RM; hh-rlhf prompts with an IFEval
   instruction: IFEval check + RM; glaive tool dialogues: BFCL AST check), the best and worst per prompt
   become RS-SFT data and pairs; round 1 is published to the catalog, an RS-SFT member is trained on it and
   round 2 runs with the refreshed committee {sft, dpo, sft-r1}.
Prints each round's mean reward (all responses, per member, best per prompt). A rerun reads every rollout,
reward and reference log-prob from the cache and prints `model calls 0`.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "data" / "samples"
GSM8K = SAMPLES / "gsm8k" / "train_short64.jsonl"


def gsm8k_chat_records(path: Path = GSM8K, *, limit: int = 32) -> list[dict]:
    """GSM8K train records as SFT conversations in the iTeC math prompt's format."""
    from .prompt_sets import MATH_SUFFIX
    from .post_loop import read_records

    out = []
    for rec in read_records(path)[:limit]:
        reasoning, final = rec["answer"].split("####")
        reasoning = re.sub(r"<<[^>]*>>", "", reasoning).strip().replace("\n", " ")
        out.append({"messages": [{"role": "user", "content": rec["question"] + MATH_SUFFIX},
                                 {"role": "assistant", "content": f"{reasoning} The answer is {final.strip()}."}]})
    return out


def _post(name: str, method: str, out: Path, **extra) -> dict:
    raw = {"name": name, "method": method, "model": {"shape": "tiny", "vocab_size": 256}, "tokenizer": "bytes",
           "seq_length": 256, "global_batch": 8, "micro_batch": 8, "seed": 1234, "log_every": 0,
           "out_dir": str(out / name),
           "optim": {"name": "afm_rmsprop", "peak_lr": 0.01, "weight_decay": 0.0, "warmup_steps": 3,
                     "final_fraction": 0.005, "mup_base_width": 64}}
    raw.update(extra)
    return raw


def members(out: Path, *, log=lambda *_: None) -> dict[str, str]:
    """Train (or reuse) the demo's SFT, DPO and RM checkpoints; returns their directories."""
    from .checkpoint import open_checkpoint
    from .dpo import train_dpo
    from .post_config import from_dict
    from .reward import train_rm
    from .sft import train_sft

    def reuse(name):
        try:
            return str(open_checkpoint(out / name).directory)
        except Exception:  # noqa: BLE001 - not trained yet
            return None

    data = out / "sft-gsm8k.jsonl"
    if not data.exists():
        data.parent.mkdir(parents=True, exist_ok=True)
        data.write_text("".join(json.dumps(r) + "\n" for r in gsm8k_chat_records()))
    sft = reuse("sft") or str(train_sft(from_dict(_post(
        "sft", "sft", out, steps=30, optim={"name": "afm_rmsprop", "peak_lr": 0.03, "warmup_steps": 3,
                                           "mup_base_width": 64},
        data={"sources": [{"path": str(SAMPLES / "preference/llamafactory/kto_en_demo.json.gz")},
                          {"path": str(data), "weight": 2.0}], "valid_fraction": 0.1})), log=log).checkpoint)
    dpo = reuse("dpo") or str(train_dpo(from_dict(_post(
        "dpo", "dpo", out, steps=15, init_from=sft, dpo={"loss": "dpo", "beta": 0.1},
        data={"sources": [{"path": str(SAMPLES / "preference/llamafactory/dpo_en_demo.json.gz"),
                           "format": "llamafactory", "max_records": 120}], "valid_fraction": 0.15})),
        log=log).checkpoint)
    rm = reuse("rm") or str(train_rm(from_dict(_post(
        "rm", "rm", out, steps=20, init_from=sft, rm={},
        data={"sources": [{"path": str(SAMPLES / "preference/hh_rlhf/harmless-base_test_first800.jsonl.gz"),
                           "format": "hh_rlhf", "max_records": 100},
                          {"path": str(SAMPLES / "preference/alpaca_eval/fusechat_weighted.json.gz"),
                           "format": "alpaca_eval", "max_records": 100}], "valid_fraction": 0.2})),
        log=log).checkpoint)
    return {"sft": sft, "dpo": dpo, "rm": rm}


def config(root: str, ckpts: dict[str, str], *, rounds: int = 2, prompts_per_kind: int = 8):
    from .itec_config import from_dict

    out = Path(root) / ".runs" / "itec-demo"
    n = prompts_per_kind
    return from_dict({
        "name": "demo", "root": str(root), "out_dir": str(out / "itec"),
        "prompts": [
            {"kind": "gsm8k", "path": str(GSM8K), "skip": 32, "limit": 2 * n},
            {"kind": "preference", "path": str(SAMPLES / "preference/llamafactory/dpo_en_demo.json.gz"), "limit": n},
            {"kind": "instructions", "path": str(SAMPLES / "preference/hh_rlhf/harmless-base_test_first800.jsonl.gz"),
             "limit": n},
            {"kind": "glaive", "path": str(SAMPLES / "glaive/glaive_toolcall_en_demo.json"), "limit": n}],
        "committee": [{"name": "sft", "checkpoint": ckpts["sft"]}, {"name": "dpo", "checkpoint": ckpts["dpo"]}],
        "samples_per_member": 2,
        "generation": {"max_new_tokens": 48, "temperature": 0.8, "top_p": 0.95, "seed": 0, "max_prompt_tokens": 512},
        "rewards": {"rm_checkpoint": ckpts["rm"],
                    "weights": {"chat": {"rm": 1.0}, "math": {"math": 1.0, "rm": 0.1},
                                "instruction": {"instruction": 1.0, "rm": 0.1}, "tool": {"tool": 1.0, "rm": 0.1}}},
        "selection": {"min_margin": 0.01},  # the tiny RM's scores differ by ~1e-4: not a preference
        "rounds": rounds,
        "refresh": [{"method": "sft", "steps": 30}],
        "train": {"seq_length": 384, "micro_batch": 8, "global_batch": 8, "peak_lr": 0.01, "valid_fraction": 0.1},
    })


def run(root: str, *, rounds: int = 2, quiet: bool = True) -> dict:
    from .itec import run_itec

    log = (lambda *_: None) if quiet else print
    t0 = time.perf_counter()
    ckpts = members(Path(root) / ".runs" / "itec-demo", log=log)
    t1 = time.perf_counter()
    cfg = config(root, ckpts, rounds=rounds)
    result = run_itec(cfg, log=print)
    for r in result.rounds:
        print(f"iTeC round {r.round}: mean reward {r.mean_reward:.4f} over {len(r.committee)} members "
              f"({', '.join(f'{m} {v:.4f}' for m, v in r.mean_reward_by_member.items())}), best per prompt "
              f"{r.mean_best_reward:.4f}; {r.counters['rs_rows']} RS rows, {r.counters['pairs']} pairs -> {r.version}")
    print(f"iTeC demo: members {t1 - t0:.0f} s, iTeC {time.perf_counter() - t1:.0f} s; "
          f"model calls {result.model_calls.total} ({result.model_calls})")
    return {"rounds": result.rounds, "model_calls": result.model_calls, "config": cfg}


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--root", default="data/root")
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    run(a.root, rounds=a.rounds, quiet=False)
