"""iTeC demo at tiny shapes on CPU, on the verifiable addition task of the MDLOO demo: `run(root)` for `make demo`.

1. members: the MDLOO demo's SFT'd tiny addition model (`sft`) and its MDLOO policy (`rl`), read from
   `<root>/.runs/mdloo-demo/` when `training.mdloo_demo` ran first under the same root; otherwise the SFT
   warm start is trained here with the MDLOO demo's own settings (training.mdloo_demo.configs) and the
   committee is {sft} alone;
2. prompts: the MDLOO demo's addition prompts (training.rl_tasks, digits 0..4: 25 distinct sums). A seeded
   share of the distinct sums is held out: iTeC never samples them, they only measure the members;
3. iTeC (training/itec.py): each member samples 4 answers per prompt, the math rule reward checks them (answer
   equivalence; no RM in this config), the best answer per prompt that is right becomes rejection-sampling SFT
   data; round 1 is published, `sft-r1` is SFT'd from `sft` on it and joins round 2's committee.
Prints per round the committee's mean sampled reward and, per member, the greedy accuracy on the held-out
sums (greedy answers there are recomputed on each run; iTeC's own rollouts, rewards and members come from its
cache on a rerun, which prints `model calls 0`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

HELD_OUT_SUMS = 10  # of the 25 distinct "a+b" (a, b in 0..4)


def split_prompts(records: list[dict], *, held_out: int = HELD_OUT_SUMS, seed: int = 0) -> tuple[list, list]:
    """(training records, one record per held-out distinct prompt): held-out prompts never appear in training."""
    distinct = sorted({r["messages"][-1]["content"] for r in records})
    rng = np.random.default_rng(seed)
    held = {distinct[i] for i in rng.permutation(len(distinct))[:held_out]}
    train = [r for r in records if r["messages"][-1]["content"] not in held]
    seen, test = set(), []
    for r in records:
        c = r["messages"][-1]["content"]
        if c in held and c not in seen:
            seen.add(c)
            test.append(r)
    return train, sorted(test, key=lambda r: r["messages"][-1]["content"])


def members(root: Path, *, log=lambda *_: None) -> dict[str, str]:
    """The MDLOO demo's checkpoints under root (sft, and rl when its MDLOO run finished); else trains the SFT."""
    from .checkpoint import open_checkpoint
    from .mdloo_demo import configs
    from .post_config import from_dict
    from .sft import train_sft

    def reuse(path: Path):
        try:
            return str(open_checkpoint(path).directory)
        except Exception:  # noqa: BLE001 - not there (yet)
            return None

    mdloo_out = root / ".runs" / "mdloo-demo"
    sft = reuse(mdloo_out / "sft")
    rl = reuse(mdloo_out / "mdloo") if sft else None
    if sft is None:  # the MDLOO demo has not run under this root: its SFT warm start, trained here
        out = root / ".runs" / "itec-demo"
        sft_raw, _ = configs(out)
        sft = reuse(out / "sft") or str(train_sft(from_dict(sft_raw), log=log).checkpoint)
    return {"sft": sft, **({"rl": rl} if rl else {})}


def greedy_accuracy(checkpoint: str, records: list[dict], *, max_new_tokens: int = 10) -> float:
    """Share of prompt records a checkpoint answers right greedily (the math rule reward checks the answers)."""
    from .rl_tasks import answer_reward
    from .rollout import generate, load_policy
    from .rollout.policy import chat_prompt_ids

    policy = load_policy(checkpoint, max_length=128)
    ids = [chat_prompt_ids(r["messages"], policy.tokenizer) for r in records]
    outs = generate(policy.model, ids, max_new_tokens=max_new_tokens, temperature=0.0, stop=policy.stop_sequences(),
                    eos_id=policy.eos_id)
    return float(np.mean([answer_reward(policy.decode(o.text_ids()), r["answer"]) for o, r in zip(outs, records)]))


def config(root: str, ckpts: dict[str, str], prompts_path: str, *, rounds: int = 2, steps: int = 30,
           peak_lr: float = 0.01):
    from .itec_config import from_dict

    out = Path(root) / ".runs" / "itec-demo"
    return from_dict({
        "name": "demo", "root": str(root), "out_dir": str(out / "itec"),
        "prompts": [{"kind": "gsm8k", "path": prompts_path}],  # math prompts: RL records, answers checked
        "committee": [{"name": n, "checkpoint": c} for n, c in ckpts.items()],
        "samples_per_member": 4,
        "generation": {"max_new_tokens": 10, "temperature": 1.0, "top_p": 1.0, "seed": 0, "max_prompt_tokens": 64,
                       "max_batch_size": 64},
        "rewards": {"weights": {"math": {"math": 1.0}}},
        "selection": {"min_margin": 0.5, "min_best_reward": 1.0},  # RS keeps only right answers
        "rounds": rounds,
        "refresh": [{"method": "sft", "steps": steps}],
        "train": {"seq_length": 64, "micro_batch": 8, "global_batch": 8, "peak_lr": peak_lr, "valid_fraction": 0.1},
    })


def run(root: str, *, rounds: int = 2, prompts: int = 48, quiet: bool = True, order: tuple | None = None,
        **settings) -> dict:
    """order: the committee's member names in order (the first is the reference and the refresh init);
    settings: config()'s refresh steps / peak_lr."""
    from .itec import run_itec
    from .rl_tasks import addition_records

    log = (lambda *_: None) if quiet else print
    t0 = time.perf_counter()
    ckpts = members(Path(root), log=log)
    if order:
        ckpts = {n: ckpts[n] for n in order}
    train, test = split_prompts(addition_records(400, seed=2, with_answer=False, high=4))  # the MDLOO demo's
    path = Path(root) / ".runs" / "itec-demo" / "data" / "itec-addition-prompts.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in train[:prompts]))
    t1 = time.perf_counter()
    cfg = config(root, ckpts, str(path), rounds=rounds, **settings)
    result = run_itec(cfg, log=log)
    t2 = time.perf_counter()
    seen = sorted({r["messages"][-1]["content"]: r for r in train[:prompts]}.values(),
                  key=lambda r: r["messages"][-1]["content"])  # one record per distinct sum iTeC sampled
    accuracy = {m.name: greedy_accuracy(m.checkpoint, test) for m in result.members}
    accuracy_seen = {m.name: greedy_accuracy(m.checkpoint, seen) for m in result.members}
    print(f"iTeC on addition: {prompts} prompts ({len(seen)} distinct sums), greedy accuracy on {len(test)} held-out "
          f"sums iTeC never samples; members: {', '.join(ckpts)}")
    for r in result.rounds:
        new = r.committee[-1] if r.round > 1 else r.committee[0]
        print(f"iTeC round {r.round}: committee mean sampled reward {r.mean_reward:.4f} "
              f"({', '.join(f'{m} {v:.4f}' for m, v in r.mean_reward_by_member.items())}); {r.counters['rs_rows']} "
              f"RS rows -> {r.version}; {'new member ' if r.round > 1 else ''}{new} held-out greedy accuracy "
              f"{accuracy[new]:.3f} (on the {len(seen)} sums iTeC sampled: {accuracy_seen[new]:.3f})")
    print(f"iTeC demo: members {t1 - t0:.0f} s, iTeC {t2 - t1:.0f} s, held-out {time.perf_counter() - t2:.0f} s; "
          f"model calls {result.model_calls.total} ({result.model_calls})")
    return {"rounds": result.rounds, "model_calls": result.model_calls, "config": cfg, "accuracy": accuracy,
            "accuracy_seen": accuracy_seen, "held_out": test, "train": train[:prompts]}


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--root", default="data/root")
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    run(a.root, rounds=a.rounds, quiet=False)
