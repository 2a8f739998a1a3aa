"""Log-likelihood scoring speed on CPU: ours (`eval model`'s megatron backend on the checkpoint, and its HF
backend on the export) against lm-evaluation-harness's HFLM on the same HF export, on the same requests
(ARC-Easy multiple choice from ../shared/data/benchmarks, 4 requests per item). Same torch thread count for all;
interleaved rounds, best time of each (the machine is shared).
Prints items/s for each and the ratio ours / lm-eval (goal >= 1x).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/eval_loglik.py [--items 200] [--checkpoint DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "benchmarks"


def _checkpoint(tmp: Path) -> Path:
    from tests.training.helpers import quiet, tiny_cfg
    from training.byte_mixture import bundled_c4_texts, publish_tiny_mixtures
    from training.trainer import train

    publish_tiny_mixtures(tmp, bundled_c4_texts())
    return train(tiny_cfg(tmp, tmp / "run", steps=40), log=quiet).checkpoint


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--checkpoint")
    ap.add_argument("--task", default="arc_easy")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from evals.model.backends import HFLM, MegatronLM
    from evals.model.loglik import items_for, score_items
    from training.export_hf import export_hf

    tmp = Path(tempfile.mkdtemp(prefix="eval-bench-"))
    ckpt = Path(args.checkpoint) if args.checkpoint else _checkpoint(tmp)
    hf_dir = export_hf(ckpt, tmp / "hf")
    items = items_for(args.task, Path(os.environ.get("CIDERMILL_BENCHMARKS", SHARED)), args.items)
    requests = [r for it in items for r in it.requests]

    ours = MegatronLM(ckpt)  # sets torch threads (CIDERMILL_TORCH_THREADS, default 1)
    threads = torch.get_num_threads()
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM as PeerHFLM

    peer = PeerHFLM(pretrained=str(hf_dir), batch_size=32, device="cpu", dtype="float32", max_length=4096)
    torch.set_num_threads(threads)
    inst = [Instance(request_type="loglikelihood", doc={}, arguments=r, idx=i) for i, r in enumerate(requests)]
    peer.loglikelihood(inst[:32], disable_tqdm=True)  # warm-up
    runners = {"ours (megatron)": ours, "ours (hf backend)": HFLM(hf_dir)}
    for lm in runners.values():
        score_items(lm, items[:8])  # warm-up
    # interleaved rounds, best of each: the machine is shared, so a single timing is noisy. CPU time of this
    # process is reported too: with one torch thread it is what the scoring cost, whatever else runs.
    best = {name: (float("inf"), float("inf")) for name in [*runners, "peer"]}
    accs = {}

    def timed(fn):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        return out, time.perf_counter() - w, time.process_time() - c

    for _ in range(args.rounds):
        peer_out, w, c = timed(lambda: peer.loglikelihood(inst, disable_tqdm=True))
        best["peer"] = (min(best["peer"][0], w), min(best["peer"][1], c))
        for name, lm in runners.items():
            (metrics, _), w, c = timed(lambda: score_items(lm, items))
            best[name] = (min(best[name][0], w), min(best[name][1], c))
            accs[name] = metrics["acc"]
    peer_s, peer_cpu = best["peer"]
    timings = {name: (best[name], accs[name]) for name in runners}
    k, correct = 0, 0
    for it in items:
        lls = [lp for lp, _ in peer_out[k: k + len(it.requests)]]
        k += len(it.requests)
        correct += max(range(len(lls)), key=lls.__getitem__) == it.gold
    print(f"{args.task}: {len(items)} items, {len(requests)} requests, torch threads {threads}")
    print(f"{'lm-eval HFLM (peer)':22s} {len(items) / peer_s:8.1f} items/s wall {len(items) / peer_cpu:8.1f} items/s CPU"
          f"  acc {correct / len(items):.4f}")
    for name, ((sec, cpu), acc) in timings.items():
        print(f"{name:22s} {len(items) / sec:8.1f} items/s wall {len(items) / cpu:8.1f} items/s CPU  acc {acc:.4f}"
              f"  ratio wall {peer_s / sec:.2f}x CPU {peer_cpu / cpu:.2f}x")


if __name__ == "__main__":
    main()
