"""Rollout throughput: the megatron generator (training/rollout) with and without its KV cache, against
transformers' `generate` on the same weights exported to Hugging Face format (the CPU peer), and vLLM on the
same export when vLLM and a GPU are present. Greedy, every sequence runs the full `--new` tokens (no eos).

    .venv/bin/python benchmarks/rollout_throughput.py [--shape tiny] [--batch 16] [--new 64] [--repeat 2]

Prompts: the first `--batch` GSM8K seed questions shipped in data/samples (byte tokens, different lengths),
in our chat template. Prints generated tokens/s per backend and the ratio to the megatron generator with cache.
Random weights: throughput does not depend on what the model learned.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from training import checkpoint as ckpt  # noqa: E402
from training import parallel  # noqa: E402
from training.chat import ByteTokenizer  # noqa: E402
from training.model import build_model, get_shape  # noqa: E402
from training.rollout import generate  # noqa: E402
from training.rollout.policy import chat_prompt_ids  # noqa: E402


def prompts(n: int) -> list[list[int]]:
    from training.prompt_sets import gsm8k_prompts

    rows = gsm8k_prompts(limit=n)
    tok = ByteTokenizer()
    return [chat_prompt_ids(r["messages"], tok) for r in rows]


def timed(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="tiny")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    parallel.setup(parallel.ParallelConfig(), seed=1)
    shape = get_shape(args.shape, vocab_size=256)
    ps = prompts(args.batch)
    longest = max(map(len, ps))
    model = build_model(shape, seq_length=longest + args.new, rotary_base=500_000).eval()
    n_tokens = args.batch * args.new
    dev = parallel.device()
    print(f"shape {args.shape}, batch {args.batch}, prompts {min(map(len, ps))}-{longest} tokens, "
          f"{args.new} new tokens each, device {dev}, torch threads {torch.get_num_threads()}")

    rows = []
    t_cache, outs = timed(lambda: generate(model, ps, max_new_tokens=args.new, temperature=0.0), args.repeat)
    rows.append(("megatron generator, KV cache", t_cache))
    t_full, outs_full = timed(lambda: generate(model, ps, max_new_tokens=args.new, temperature=0.0,
                                               use_cache=False), 1)
    rows.append(("megatron generator, full recompute", t_full))
    same = [o.response_ids for o in outs] == [o.response_ids for o in outs_full]

    with tempfile.TemporaryDirectory() as tmp:
        ck = Path(tmp) / "ckpt"
        ckpt.save(ck, model=model, manifest={
            "run": "bench", "stage": "bench", "model_shape": asdict(shape), "rotary_base": 500_000,
            "kernels": "local", "config": {"tokenizer": "bytes"}, "data": {"seq_length": longest + args.new}})
        from training.rollout.vllm_backend import export_policy

        hf_dir = export_policy(ck, Path(tmp) / "hf")
        from transformers import AutoModelForCausalLM

        hf = AutoModelForCausalLM.from_pretrained(str(hf_dir)).to(dev).eval()
        ids = torch.zeros((len(ps), longest), dtype=torch.long)
        att = torch.zeros_like(ids)
        for i, p in enumerate(ps):
            ids[i, longest - len(p):], att[i, longest - len(p):] = torch.tensor(p), 1

        def hf_gen():
            with torch.no_grad():
                return hf.generate(ids.to(dev), attention_mask=att.to(dev), max_new_tokens=args.new,
                                   min_new_tokens=args.new, do_sample=False, pad_token_id=0, eos_token_id=None)

        t_hf, hf_out = timed(hf_gen, args.repeat)
        rows.append(("transformers generate (HF export), KV cache", t_hf))
        hf_same = sum(hf_out[i, longest:].tolist() == outs[i].response_ids for i in range(len(ps)))

        try:
            import vllm  # noqa: F401
            have_vllm = torch.cuda.is_available()
        except ImportError:
            have_vllm = False
        if have_vllm:  # pragma: no cover - GPU only
            from vllm import LLM, SamplingParams, TokensPrompt

            llm = LLM(model=str(hf_dir), max_model_len=longest + args.new, gpu_memory_utilization=0.3)
            sp = SamplingParams(max_tokens=args.new, min_tokens=args.new, temperature=0.0, ignore_eos=True)
            t_v, _ = timed(lambda: llm.generate([TokensPrompt(prompt_token_ids=p) for p in ps], sp,
                                                use_tqdm=False), args.repeat)
            rows.append(("vLLM (HF export)", t_v))
        else:
            print("vLLM: not measured (needs the vllm package and a CUDA GPU; neither is on this machine)")

    for name, t in rows:
        print(f"{name:<46} {n_tokens / t:10.1f} tokens/s  ({t:.2f} s; x{t_cache / t:.2f} of the cached generator)")
    print(f"greedy outputs: cache == full recompute: {same}; transformers == megatron: {hf_same}/{len(ps)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
