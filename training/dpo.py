"""DPO and IPO against reference log-probs computed once and cached.

With policy and reference log-probs of the chosen (c) and rejected (r) responses:
- DPO (Rafailov et al. 2023): loss = −log σ(β·[(π_c − ref_c) − (π_r − ref_r)]); the implicit rewards are
  β·(π − ref), and held-out preference accuracy is how often the chosen one's is larger.
- IPO (Azar et al. 2023), here with length-normalised log-ratios: h = (π_c − ref_c)/|c| − (π_r − ref_r)/|r|
  (|·| = response tokens); loss = (h − 1/(2τ))², τ = `dpo.beta`.

The reference model runs once over every training and held-out pair before training, and its log-probs are
saved under (data id, reference checkpoint id); the reference model is then dropped, and a later run with
the same data and reference reads the cache without building it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
import torch.nn.functional as F

from . import checkpoint as ckpt
from . import parallel
from .chat import load_tokenizer
from .packing import uses_thd
from .post_loop import build_gpt, data_id, forward, run_loop
from .prefs import load_pairs, pair_batch, sequence_logps


def dpo_loss(pi_c, pi_r, ref_c, ref_r, *, beta: float):
    """Per-pair DPO loss and the implicit reward margin β·[(π_c − ref_c) − (π_r − ref_r)]."""
    margin = beta * ((pi_c - ref_c) - (pi_r - ref_r))
    return -F.logsigmoid(margin), margin


def ipo_loss(pi_c, pi_r, ref_c, ref_r, len_c, len_r, *, tau: float):
    """Per-pair IPO loss on length-normalised log-ratios, and h (the normalised margin)."""
    h = (pi_c - ref_c) / len_c - (pi_r - ref_r) / len_r
    return (h - 1.0 / (2.0 * tau)) ** 2, h


def reference_id(path: str) -> str:
    info = ckpt.open_checkpoint(path)
    body = (info.directory / ckpt.CHECKPOINT_MANIFEST).read_bytes()
    return hashlib.sha256(body).hexdigest()[:16]


@torch.no_grad()
def _logps(model, items, cfg, pad_id) -> tuple[torch.Tensor, torch.Tensor]:
    dev = parallel.device()
    model.eval()
    out_c, out_r = [], []
    for at in range(0, len(items), cfg.micro_batch):
        chunk = items[at: at + cfg.micro_batch]
        b = {k: v.to(dev) for k, v in pair_batch(chunk, cfg.seq_length, pad_id,
                                                                  thd=uses_thd(cfg.parallel)).items()}
        lp = sequence_logps(forward(model, b), b["labels"], b["loss_mask"]).cpu()
        out_c.append(lp[: len(chunk)])
        out_r.append(lp[len(chunk):])
    model.train()
    return torch.cat(out_c), torch.cat(out_r)


def reference_logps(cfg, train, valid, pad_id, *, data: str, log=print) -> tuple[dict, str]:
    """{'train': (c, r), 'valid': (c, r)} from the cache, or computed once with the reference model."""
    reference = cfg.dpo.reference or cfg.init_from
    key = hashlib.sha256(json.dumps([data, reference_id(reference)]).encode()).hexdigest()[:20]
    cache_dir = Path(cfg.dpo.cache_dir) if cfg.dpo.cache_dir else Path(cfg.out_dir).parent / "ref-logp-cache"
    path = cache_dir / f"{key}.pt"
    if path.exists():
        log(f"[{cfg.name}] reference log-probs from the cache {path}")
        return torch.load(path, weights_only=True), "hit"
    ref = build_gpt(cfg, init_from=reference)
    for p in ref.parameters():
        p.requires_grad_(False)
    cached = {"train": _logps(ref, train, cfg, pad_id), "valid": _logps(ref, valid, cfg, pad_id),
              "data": data, "reference": str(reference)}
    del ref  # not in memory during training
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(cached, tmp)
    tmp.replace(path)
    log(f"[{cfg.name}] reference log-probs of {len(train)} + {len(valid)} pairs cached at {path}")
    return cached, "miss"


def _objective(cfg, pi_c, pi_r, ref_c, ref_r, len_c, len_r):
    if cfg.dpo.loss == "dpo":
        return dpo_loss(pi_c, pi_r, ref_c, ref_r, beta=cfg.dpo.beta)
    return ipo_loss(pi_c, pi_r, ref_c, ref_r, len_c, len_r, tau=cfg.dpo.beta)


def preference_figures(cfg, policy_c, policy_r, ref_c, ref_r, len_c, len_r) -> dict:
    """Held-out: loss, preference accuracy (implicit reward of chosen > rejected), mean reward margin."""
    loss, margin = _objective(cfg, policy_c, policy_r, ref_c, ref_r, len_c, len_r)
    # ties (margin exactly 0, e.g. policy == reference) count one half
    acc = ((margin > 0).float() + 0.5 * (margin == 0).float()).mean()
    return {"loss": float(loss.mean()), "preference_accuracy": float(acc),
            "reward_margin": float(margin.mean()), "pairs": len(margin)}


def _lengths(items):
    return (torch.tensor([float(it.chosen.trainable.sum()) for it in items]),
            torch.tensor([float(it.rejected.trainable.sum()) for it in items]))


def train_dpo(cfg, *, resume: str | None = None, stop_after: int | None = None, log=print):
    parallel.setup(cfg.parallel, seed=cfg.seed)
    tokenizer = load_tokenizer(cfg.tokenizer)
    train, valid, counters = load_pairs(cfg, tokenizer)
    data = data_id(cfg)
    log(f"[{cfg.name}] {len(train)} training and {len(valid)} held-out pairs ({counters}); loss {cfg.dpo.loss}")
    ref, cache = reference_logps(cfg, train, valid, tokenizer.pad_id, data=data, log=log)
    model = build_gpt(cfg, init_from=cfg.init_from)
    dev = parallel.device()
    len_c, len_r = _lengths(train)
    vlen_c, vlen_r = _lengths(valid)

    def evaluate():
        pc, pr = _logps(model, valid, cfg, tokenizer.pad_id)
        return preference_figures(cfg, pc, pr, *ref["valid"], vlen_c, vlen_r)

    start = evaluate()
    log(f"[{cfg.name}] held-out at the start: {start}")

    def micro_batch_at(indices):
        b = {k: v.to(dev) for k, v in pair_batch([train[i] for i in indices], cfg.seq_length,
                                                 tokenizer.pad_id, thd=uses_thd(cfg.parallel)).items()}
        idx = torch.tensor(indices)
        b.update(ref_c=ref["train"][0][idx].to(dev), ref_r=ref["train"][1][idx].to(dev),
                 len_c=len_c[idx].to(dev), len_r=len_r[idx].to(dev))
        return b

    def loss_fn(m, b):
        lp = sequence_logps(forward(m, b), b["labels"], b["loss_mask"])
        n = len(b["ref_c"])
        loss, margin = _objective(cfg, lp[:n], lp[n:], b["ref_c"], b["ref_r"], b["len_c"], b["len_r"])
        margin = margin.detach()
        return loss.mean(), {"accuracy": float((margin > 0).float().mean()), "margin": float(margin.mean())}

    result = run_loop(cfg, model, n_items=len(train), micro_batch_at=micro_batch_at, loss_fn=loss_fn,
                      evaluate=evaluate, data=data, resume=resume, stop_after=stop_after, log=log,
                      extra_manifest={"reference": cfg.dpo.reference or cfg.init_from,
                                      "held_out_start": start, "data_counters": counters})
    result.evals.insert(0, (0, start))
    result.reference_cache = cache
    return result
