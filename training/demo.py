"""`make demo` step: train the tiny AFM-architecture model on the demo's own core mixture and show the
loss falling. Reads `demo-core` (published by corpus.mix.demo); if that mixture is missing, falls back to a
byte-level mixture over the `c4-clean` version (training.byte_mixture) and says so.
"""

from __future__ import annotations

import time
from pathlib import Path

from manifests.catalog import Catalog
from manifests.errors import ManifestError

MIXTURE = "demo-core"


def _mixture_ref(root: str) -> str:
    catalog = Catalog(root)
    if MIXTURE in catalog.names():
        return MIXTURE
    from .byte_mixture import bundled_c4_texts, publish_byte_mixture

    try:
        texts = catalog.resolve("c4-clean").read(columns=["text"]).column("text").to_pylist()
        source = "c4-clean"
    except ManifestError:
        texts, source = bundled_c4_texts(), "the bundled C4 sample"
    print(f"train demo: no {MIXTURE} mixture in {root}; tokenizing {source} as UTF-8 bytes instead")
    publish_byte_mixture(root, name="demo-core-bytes", stage="core", seq_length=128, token_budget=128 * 16 * 60,
                         components={"web": (1.0, texts)})
    return "demo-core-bytes"


def run(root: str) -> None:
    from .config import from_dict
    from .data import blend_from_mixture
    from .trainer import train

    start = time.perf_counter()
    ref = _mixture_ref(root)
    blend = blend_from_mixture(ref, root=root)
    steps = min(50, -(-blend.num_samples // 8))
    cfg = from_dict({
        "name": "demo-tiny-core", "stage": "core",
        "model": {"shape": "tiny", "vocab_size": blend.vocab_size},
        "data": {"mixture": ref, "root": root, "valid_samples": 32},
        # The AFM optimizer clips each block's raw update to RMS 1 (AXLearn), so the per-entry step is
        # about the rate: 0.03, the best of a sweep on the byte-level tiny-core (benchmarks/train_optimizer.py)
        "optim": {"name": "afm_rmsprop", "peak_lr": 0.03, "weight_decay": 3.16e-4, "warmup_steps": 5,
                  "final_fraction": 0.005, "mup_base_width": 64},
        "global_batch": 8, "micro_batch": 8, "steps": steps, "seed": 1234,
        "out_dir": str(Path(root) / ".runs" / "demo-tiny-core"), "log_every": 10,
    })
    print(f"training shape 'tiny' (AFM architecture: RMSNorm, qk-norm, GQA, SwiGLU, RoPE 500k, tied embeddings) "
          f"on {blend.id[:blend.id.find('@') + 13]} ({blend.seq_length} tokens/sequence, vocabulary {blend.vocab_size:,}) for {steps} steps "
          f"with the AFM optimizer")
    result = train(cfg, resume=None)
    print(f"loss {result.losses[0]:.3f} -> {result.losses[-1]:.3f} (held-out {result.eval_loss:.3f}); "
          f"checkpoint {result.checkpoint} ({time.perf_counter() - start:.0f} s)")
    if not result.losses[-1] < result.losses[0]:
        raise RuntimeError("train demo: the loss did not fall")
