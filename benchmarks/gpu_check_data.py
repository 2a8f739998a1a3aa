"""gpu-check step of the data side (benchmarks/gpu_check.py):
  semantic  the opt-in web_safety_semantic_v1 stage (MiniLM per 200-word window) with `device: cuda`: its scores
            equal the CPU's on the same pages (a tolerance for float order), the same pages are over the
            manifest's threshold, and pages/s of 5 KB pages on one GPU (the CPU does ~2 a core). In a `--dry`
            run the same code runs on the CPU on a few pages (wiring, not speed).
"""

from __future__ import annotations

import time

from gpu_check_common import Ctx, Report, say

TOLERANCE = 2e-3  # cosine differences between a GPU's and a CPU's float order
N_COMPARE = 16
N_TIMED = 2000
N_DRY = 4  # pages compared and timed in a CPU dry run
DRY_semantic = True


def _pages(n: int, size: int = 5000) -> list[str]:
    from web_common import c4_texts

    text = "\n".join(c4_texts())
    chunks = [text[i:i + size] for i in range(0, len(text) - size, size)]
    return [chunks[i % len(chunks)] for i in range(n)]


def setup_semantic(ctx: Ctx, rep: Report) -> dict:
    from corpus.stages.web_safety import WebSafetySemantic
    from corpus.web import safety_semantic

    WebSafetySemantic({"device": "cpu"})  # the config, the manifest and the encoder's folder are checked
    threshold = safety_semantic.load().threshold
    return {"pages": _pages(N_TIMED if ctx.cuda else N_DRY), "threshold": threshold}


def _scores(pages: list[str], device: str, batch_size: int = 64) -> list[float]:
    import pyarrow as pa

    from corpus.stages.web_safety import WebSafetySemantic

    table = pa.table({"id": [str(i) for i in range(len(pages))], "text": pages})
    stage = WebSafetySemantic({"device": device, "batch_size": batch_size})
    return stage(table).table.column("safety__semantic").to_pylist()


def run_semantic(ctx: Ctx, rep: Report, st: dict) -> None:
    import torch

    device = "cuda" if ctx.cuda else "cpu"  # cpu: a dry run
    sync = torch.cuda.synchronize if ctx.cuda else (lambda: None)
    few = st["pages"][:N_COMPARE]
    cpu, gpu = _scores(few, "cpu"), _scores(few, device)
    diff = max(abs(a - b) for a, b in zip(cpu, gpu))
    rep.number("max_score_diff_gpu_cpu", round(diff, 6))
    rep.check("GPU scores equal the CPU's", diff <= TOLERANCE, f"max |diff| {diff:.2g} (tolerance {TOLERANCE})")
    t = st["threshold"]
    rep.check("the same pages over the threshold", [s > t for s in cpu] == [s > t for s in gpu],
              f"{sum(s > t for s in gpu)} of {len(few)} over {t:.4f}")
    _scores(few, device, 256)  # warm
    sync()
    start = time.perf_counter()
    _scores(st["pages"], device, 256)
    sync()
    rate = len(st["pages"]) / (time.perf_counter() - start)
    rep.number("pages_per_s_5KB", round(rate, 1))
    say(f"  web_safety_semantic_v1 on {device}: {rate:.1f} pages/s of 5 KB ({len(st['pages'])} pages, batch 256)")
