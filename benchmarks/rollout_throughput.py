"""Rollout throughput: the megatron generator (training/rollout) with its KV cache (stock megatron core
attention, and the fused SDPA core attention `load_policy` uses) and without a cache, against transformers'
`generate` on the same weights exported to Hugging Face format (the CPU peer), and vLLM on the same export when
vLLM and a GPU are present. Greedy; every sequence runs the full `--new` tokens (no eos).

    .venv/bin/python benchmarks/rollout_throughput.py [--shape tiny] [--batch 16] [--new 64] [--repeat 5]

Prompts: the first `--batch` GSM8K seed questions shipped in data/samples (byte tokens, different lengths),
in our chat template. Backends are timed in turn, `--repeat` rounds (the full-recompute path once); the
median time per backend is reported, with generated tokens/s and the ratio to the cached generator. Random
weights: throughput does not depend on what the model learned. On a shared machine, look at the ratios.
"""

from __future__ import annotations

import argparse
import statistics
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
from training.prompt_sets import gsm8k_prompts  # noqa: E402
from training.rollout import generate, load_policy  # noqa: E402
from training.rollout.policy import chat_prompt_ids  # noqa: E402
from training.rollout.vllm_backend import export_policy  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="tiny")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    parallel.setup(parallel.ParallelConfig(), seed=1)
    shape = get_shape(args.shape, vocab_size=256)
    ps = [chat_prompt_ids(r["messages"], ByteTokenizer()) for r in gsm8k_prompts(limit=args.batch)]
    longest = max(map(len, ps))
    seq = longest + args.new
    model = build_model(shape, seq_length=seq, rotary_base=500_000).eval()
    n_tokens = len(ps) * args.new
    dev = parallel.device()
    print(f"shape {args.shape}, batch {len(ps)}, prompts {min(map(len, ps))}-{longest} tokens, {args.new} new "
          f"tokens each, device {dev}, torch threads {torch.get_num_threads()}")

    with tempfile.TemporaryDirectory() as tmp:
        ck = Path(tmp) / "ckpt"
        ckpt.save(ck, model=model, manifest={
            "run": "bench", "stage": "bench", "model_shape": asdict(shape), "rotary_base": 500_000,
            "kernels": "local", "config": {"tokenizer": "bytes"}, "data": {"seq_length": seq}})
        sdpa_model = load_policy(ck, max_length=seq).model
        hf_dir = export_policy(ck, Path(tmp) / "hf")
        from transformers import AutoModelForCausalLM

        hf = AutoModelForCausalLM.from_pretrained(str(hf_dir)).to(dev).eval()
        ids = torch.zeros((len(ps), longest), dtype=torch.long)
        att = torch.zeros_like(ids)
        for i, p in enumerate(ps):
            ids[i, longest - len(p):], att[i, longest - len(p):] = torch.tensor(p), 1

        def hf_gen():
            with torch.no_grad():
                out = hf.generate(ids.to(dev), attention_mask=att.to(dev), max_new_tokens=args.new,
                                  min_new_tokens=args.new, do_sample=False, pad_token_id=0, eos_token_id=None)
            return [out[i, longest:].tolist() for i in range(len(ps))]

        backends = {
            "megatron generator, KV cache": lambda: [o.response_ids for o in generate(
                model, ps, max_new_tokens=args.new, temperature=0.0)],
            "megatron generator, KV cache, SDPA attention": lambda: [o.response_ids for o in generate(
                sdpa_model, ps, max_new_tokens=args.new, temperature=0.0)],
            "transformers generate (HF export), KV cache": hf_gen,
        }
        try:
            import vllm  # noqa: F401
            have_vllm = torch.cuda.is_available()
        except ImportError:
            have_vllm = False
        if have_vllm:  # pragma: no cover - GPU only
            from vllm import LLM, SamplingParams, TokensPrompt

            llm = LLM(model=str(hf_dir), max_model_len=seq, gpu_memory_utilization=0.3)
            sp = SamplingParams(max_tokens=args.new, min_tokens=args.new, temperature=0.0, ignore_eos=True)
            backends["vLLM (HF export)"] = lambda: [list(o.outputs[0].token_ids) for o in llm.generate(
                [TokensPrompt(prompt_token_ids=p) for p in ps], sp, use_tqdm=False)]
        else:
            print("vLLM: not measured (needs the vllm package and a CUDA GPU; neither is on this machine)")

        times: dict[str, list[float]] = {k: [] for k in backends}
        outputs = {}
        for _ in range(args.repeat):
            for name, fn in backends.items():
                t0 = time.perf_counter()
                outputs[name] = fn()
                times[name].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        full = [o.response_ids for o in generate(model, ps, max_new_tokens=args.new, temperature=0.0, use_cache=False)]
        times["megatron generator, full recompute (no cache)"] = [time.perf_counter() - t0]

    ref = statistics.median(times["megatron generator, KV cache"])
    for name, ts in times.items():
        t = statistics.median(ts)
        print(f"{name:<48} {n_tokens / t:9.1f} tokens/s  (median {t:.3f} s of {len(ts)}; x{ref / t:.2f} of the "
              f"cached generator)")
    base = outputs["megatron generator, KV cache"]
    print("greedy outputs equal to the cached generator's: " + ", ".join(
        f"{name}: {sum(a == b for a, b in zip(out, base))}/{len(base)}"
        for name, out in [*outputs.items(), ("full recompute", full)] if name != "megatron generator, KV cache"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
