"""A real proxy training run for mixture ablations (AFM report 4.2): train a tiny megatron model (the AFM
architecture at the `tiny` shape) on one mixture variant for a fixed token budget, then measure held-out
cross-entropy on every component separately and their mean.

    python -m training.mix_proxy --mixture MIXTURE.json --root ROOT --out DIR --seed 1 [--tokens N]

writes DIR/scores.json: {"loss/<component>": nats per token, ..., "loss/mean": their mean} (lower is better),
plus DIR/proxy.json (what was run). Every variant of one ablation shares the shape, the token budget, the
step count, the learning rate and, per seed, the model initialisation; only the weights differ.

Held-out text is the same for every variant: megatron splits each component's documents by index range
(`valid_share`, default 5%), independently of the blend weights, so a component's held-out samples (built
from that component alone, with the mixture's seed) are identical across variants and never trained on.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from corpus.mix.ablate import open_mixture, write_scores



@dataclass(frozen=True, kw_only=True)
class ProxyConfig:
    shape: str = "tiny"
    tokens: int = 64 * 1024  # training tokens per run, whatever the mixture's own budget
    global_batch: int = 8
    peak_lr: float = 0.03  # the AFM optimizer's best tiny-core rate (benchmarks/train_optimizer.py)
    warmup_steps: int = 3
    valid_samples: int = 16  # held-out sequences per component

    def __post_init__(self):
        if self.tokens <= 0 or self.global_batch <= 0 or self.valid_samples <= 0:
            raise ValueError(f"proxy: tokens, global_batch and valid_samples must be > 0; got {self}")


def run_proxy(mixture: str, *, out_dir: str | Path, seed: int, root: str | None = None,
              cfg: ProxyConfig = ProxyConfig()) -> dict[str, float]:
    from .config import from_dict
    from .data import Blend, blend_from_mixture, build_splits
    from .model.shapes import get_shape
    from .trainer import evaluate, load_model, train

    out_dir = Path(out_dir)
    blend = blend_from_mixture(mixture, root=root)
    seq = blend.seq_length
    steps = max(1, cfg.tokens // (cfg.global_batch * seq))
    vocab = max(blend.vocab_size, get_shape(cfg.shape).vocab_size)
    run = from_dict({
        "name": f"proxy-{blend.id}-s{seed}", "stage": "core",
        "model": {"shape": cfg.shape, "vocab_size": vocab},
        "data": {"mixture": mixture, "root": root, "valid_samples": cfg.valid_samples,
                 "cache_dir": str(out_dir / "data-cache")},
        "optim": {"name": "afm_rmsprop", "peak_lr": cfg.peak_lr, "warmup_steps": cfg.warmup_steps,
                  "mup_base_width": get_shape(cfg.shape).hidden_size},
        "global_batch": cfg.global_batch, "micro_batch": cfg.global_batch, "steps": steps, "seed": seed,
        "out_dir": str(out_dir / "train"), "log_every": 0,
    })
    result = train(run, log=lambda *_: None)
    model, _ = load_model(result.checkpoint, seq_length=seq)
    scores = {}
    for (_, prefix), comp in zip(blend.components, _component_names(mixture, root, len(blend.components))):
        alone = Blend(components=((1.0, prefix),), vocab_size=blend.vocab_size, eod_id=blend.eod_id)
        splits = build_splits(alone, seq_length=seq, seed=blend.seed or 1234, n_train=1,
                              n_valid=cfg.valid_samples, cache_dir=out_dir / "data-cache")
        scores[f"loss/{comp}"] = evaluate(model, splits.valid, micro_batch=cfg.global_batch)["loss"]
    scores["loss/mean"] = sum(scores.values()) / len(scores)
    (out_dir / "proxy.json").write_text(json.dumps({
        "mixture": blend.id, "seed": seed, "steps": steps, "tokens": steps * cfg.global_batch * seq,
        "seq_length": seq, "train_loss_last": result.losses[-1], "skipped_steps": result.skipped_steps,
        "seconds": result.seconds, "config": asdict(cfg)}, indent=2))
    write_scores(str(out_dir), scores)  # written last: its presence means the run finished
    return scores


def _component_names(mixture: str, root: str | None, n: int) -> list[str]:
    names = [c.name for c in open_mixture(mixture, root).components]
    assert len(names) == n, (names, n)
    return names


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.mix_proxy", description=__doc__.split("\n\n")[0])
    ap.add_argument("--mixture", required=True, help="mixture.json path or catalog reference")
    ap.add_argument("--root", help="data root (for catalog references and relative prefixes)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=ProxyConfig.tokens, help="training tokens per run")
    ap.add_argument("--shape", default=ProxyConfig.shape)
    args = ap.parse_args(argv)
    scores = run_proxy(args.mixture, out_dir=args.out, seed=args.seed, root=args.root,
                       cfg=ProxyConfig(tokens=args.tokens, shape=args.shape))
    print(json.dumps(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
