"""Structural pruning of FFN hidden units with learned Soft-Top-K masks (AFM report 3.2.1).

The report initialises the on-device model from a larger trained model by pruning only the FFN hidden
dimension, with masks learned by Soft-Top-K (instead of HardConcrete) on the core pretraining mixture.

Soft-Top-K: for scores s ∈ R^n and a budget k, the mask λ ∈ (0,1)^n maximises sᵀλ + ε·H(λ) subject to
Σλ = k, with H the binary entropy; the solution is λ_i = σ((s_i + a)/ε) with the shift a set so that the
mask sums to k (found by bisection). Gradients flow through s and, via one Newton step on a, through the
constraint, so raising one unit's score lowers the others'. Annealing ε towards 0 makes λ nearly binary.

Recipe: attach one mask per layer in front of `linear_fc2` (the FFN output projection), freeze the model,
train the scores on the language-model loss while ε anneals, keep the k highest-scoring units per layer,
and fold the remaining mask values into `linear_fc2`'s columns so the pruned model computes what the masked
model computed. Runs with tensor parallelism 1 (prune a gathered model; shard the student afterwards) and
any number of data-parallel ranks, `micro_batch` sequences per forward pass.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import asdict
from pathlib import Path

import torch

from manifests.errors import ConfigError

from . import checkpoint as ckpt
from . import parallel
from .config import TrainConfig
from .data import batch_at, build_splits, valid_share_for
from .losses import cross_entropies, masked_mean
from .model import build_model


def soft_top_k(scores: torch.Tensor, k: int, eps: float, iters: int = 50) -> torch.Tensor:
    """λ = σ((s + a)/ε) with Σλ = k; differentiable in `scores`."""
    n = scores.numel()
    if not 0 < k <= n:
        raise ValueError(f"soft_top_k: k must be in (0, {n}]; got {k}")
    with torch.no_grad():
        lo = -scores.max() - 30 * eps  # all σ ≈ 0
        hi = -scores.min() + 30 * eps  # all σ ≈ 1
        for _ in range(iters):
            mid = (lo + hi) / 2
            if torch.sigmoid((scores + mid) / eps).sum() > k:
                hi = mid
            else:
                lo = mid
        a0 = (lo + hi) / 2
    lam = torch.sigmoid((scores + a0) / eps)
    # one Newton step on a (value unchanged at the root): da/ds = -σ'/Σσ', the implicit-function gradient
    slope = (lam * (1 - lam)).sum() / eps
    a = a0 - (lam.sum() - k) / slope.clamp(min=1e-12)
    return torch.sigmoid((scores + a) / eps)


class FFNMasks(torch.nn.Module):
    """One score vector per layer; hooks multiply each layer's FFN hidden activations [S,B,ffn] by λ."""

    def __init__(self, model, k: int, init_scores: list[torch.Tensor] | None = None):
        super().__init__()
        layers = model.decoder.layers
        ffn = layers[0].mlp.linear_fc2.weight.shape[1]
        if not 0 < k < ffn:
            raise ConfigError(f"prune: target FFN width {k} must be in (0, {ffn})")
        self.k, self.eps = k, 1.0
        init = init_scores or [torch.zeros(ffn) for _ in layers]
        self.scores = torch.nn.ParameterList([torch.nn.Parameter(s.clone().float().to(parallel.device()))
                                              for s in init])
        self._hooks = [layer.mlp.linear_fc2.register_forward_pre_hook(self._hook(i))
                       for i, layer in enumerate(layers)]

    def _hook(self, i):
        def multiply(module, inputs):
            return (inputs[0] * self.mask(i).to(inputs[0].dtype),) + tuple(inputs[1:])
        return multiply

    def mask(self, i: int) -> torch.Tensor:
        return soft_top_k(self.scores[i], self.k, self.eps)

    def remove(self) -> None:
        for h in self._hooks:
            h.remove()


def magnitude_scores(model) -> list[torch.Tensor]:
    """Start the scores from a cheap importance: ‖fc2 column‖ · ‖fc1 up-row‖ per hidden unit, standardised."""
    out = []
    for layer in model.decoder.layers:
        w1, w2 = layer.mlp.linear_fc1.weight, layer.mlp.linear_fc2.weight
        ffn = w2.shape[1]
        s = (w2.norm(dim=0) * w1[ffn:].norm(dim=1)).log()
        out.append(((s - s.mean()) / (s.std() + 1e-6)).detach().cpu())
    return out


def learn_masks(model, splits, *, k: int, steps: int, global_batch: int, micro_batch: int | None = None,
                lr: float = 0.05, eps_start: float = 1.0, eps_end: float = 0.02, log=print) -> FFNMasks:
    """Train Soft-Top-K scores on the LM loss with the model frozen; ε anneals geometrically.

    Each step reads `global_batch` sequences: this data-parallel rank's share, `micro_batch` at a time, the
    score gradients accumulated, then averaged over data-parallel ranks (every rank keeps the same scores)."""
    for p in model.parameters():
        p.requires_grad_(False)
    masks = FFNMasks(model, k, init_scores=magnitude_scores(model))
    opt = torch.optim.Adam(masks.parameters(), lr=lr)
    dev = parallel.device()
    dp_rank, dp_size = parallel.data_parallel_rank_and_size()
    micro_batch = micro_batch or global_batch // dp_size
    if global_batch % (micro_batch * dp_size):
        raise ConfigError(f"prune: global_batch {global_batch} must be a multiple of micro_batch {micro_batch} "
                          f"x data-parallel size {dp_size}")
    n_micro = global_batch // (micro_batch * dp_size)
    for step in range(steps):
        masks.eps = eps_start * (eps_end / eps_start) ** (step / max(1, steps - 1))
        opt.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for micro in range(n_micro):
            first = step * global_batch + micro * micro_batch * dp_size
            batch = {kk: v.to(dev) for kk, v in batch_at(splits.train, first, micro_batch * dp_size,
                                                         dp_rank=dp_rank, dp_size=dp_size).items()}
            logits = model(batch["tokens"], batch["position_ids"], None)
            (ce,) = cross_entropies(logits, [batch["labels"]])
            loss = masked_mean(ce, batch["loss_mask"]) / n_micro
            loss.backward()
            loss_sum += float(loss.detach())
        if dp_size > 1:
            _average_over_data_parallel([s.grad for s in masks.scores])
        opt.step()
        if log and (step + 1) % max(1, steps // 4) == 0:
            log(f"[prune] mask step {step + 1}/{steps} loss {loss_sum:.4f} eps {masks.eps:.3f}")
    return masks


def _average_over_data_parallel(grads: list[torch.Tensor]) -> None:
    import torch.distributed as dist
    from megatron.core import parallel_state

    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, group=parallel_state.get_data_parallel_group())
    flat /= parallel_state.get_data_parallel_world_size()
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


@torch.no_grad()
def pruned_state_dict(model, masks: FFNMasks) -> dict[str, torch.Tensor]:
    """The masked model restricted to each layer's top-k units, with the mask folded into fc2's columns."""
    state = {k: v.detach().clone() for k, v in model.state_dict().items() if not k.endswith("_extra_state")}
    for i, layer in enumerate(model.decoder.layers):
        lam = masks.mask(i)
        keep = torch.topk(masks.scores[i], masks.k).indices.sort().values
        ffn = layer.mlp.linear_fc2.weight.shape[1]
        w1 = layer.mlp.linear_fc1.weight  # [2*ffn, h]: gate rows, then up rows
        w2 = layer.mlp.linear_fc2.weight  # [h, ffn]
        prefix = f"decoder.layers.{i}.mlp."
        state[prefix + "linear_fc1.weight"] = torch.cat([w1[keep], w1[ffn + keep]]).clone()
        state[prefix + "linear_fc2.weight"] = (w2[:, keep] * lam[keep]).clone()
    return state


def prune(cfg: TrainConfig, *, source: str | Path, target_ffn: int, steps: int, out_dir: str | Path,
          lr: float = 0.05, log=print) -> Path:
    """Learn masks on `cfg`'s mixture for the model at checkpoint `source`; write the pruned student's
    checkpoint (shape: source shape with ffn_hidden_size=target_ffn) to out_dir; returns its path."""
    from manifests.config import require_number

    from .checkpoint import load_model

    require_number(target_ffn, "--target-ffn", where="train prune", ge=1, integer=True)
    require_number(steps, "--mask-steps", where="train prune", ge=1, integer=True)
    require_number(lr, "--mask-lr", where="train prune", gt=0)
    from .plan import plan_run

    if cfg.parallel.tensor_parallel != 1:  # e.g. the teacher's own config: masks are learned on a whole model
        log(f"[prune] {cfg.name}: tensor_parallel {cfg.parallel.tensor_parallel} -> 1; every rank is a "
            "data-parallel rank (the frozen model needs no gradients or optimizer state)")
    parallel.setup(dataclasses.replace(cfg.parallel, tensor_parallel=1), seed=cfg.seed)
    plan = plan_run(cfg)
    splits = build_splits(plan.blend, seq_length=plan.seq_length, seed=plan.data_seed,
                          n_train=steps * cfg.global_batch, n_valid=cfg.data.valid_samples,
                          cache_dir=cfg.data.cache_dir or Path(out_dir) / "data-cache",
                          valid_share=valid_share_for(cfg.data, plan.blend))
    t0 = time.perf_counter()
    model, info = load_model(source, seq_length=plan.seq_length)
    if torch.cuda.is_available() and cfg.parallel.precision == "bf16":  # frozen: bf16 weights, fp32 scores
        model = model.bfloat16()
    masks = learn_masks(model, splits, k=target_ffn, steps=steps, global_batch=cfg.global_batch,
                        micro_batch=cfg.micro_batch, lr=lr, log=log)
    state = {k: v.float() for k, v in pruned_state_dict(model, masks).items()}
    masks.remove()
    shape = model_shape_of(info).with_(ffn_hidden_size=target_ffn)
    kernels = info.manifest.get("kernels", "local")
    student = build_model(shape, seq_length=plan.seq_length, rotary_base=info.manifest["rotary_base"],
                          kernels=kernels)
    ckpt.load_state_dict_(student, state)
    kept = sum(math.prod(v.shape) for v in state.values())
    manifest = {
        "run": f"prune:{cfg.name}", "stage": "pruned", "step": 0, "steps_total": 0, "tokens_seen": 0,
        "data": {"source_id": plan.blend.id, "blend": plan.blend.megatron_blend(), "seed": plan.data_seed,
                 "seq_length": plan.seq_length},
        "data_position": {"samples_consumed": steps * cfg.global_batch},
        "model_shape": asdict(shape), "rotary_base": info.manifest["rotary_base"], "kernels": kernels,
        "pruned_from": {"checkpoint": str(source), "ffn_hidden_size": info.manifest["model_shape"]["ffn_hidden_size"],
                        "target_ffn": target_ffn, "mask_steps": steps, "parameters": kept,
                        "seconds": round(time.perf_counter() - t0, 2)},
    }
    tokenizer = (plan.blend.tokenizer, plan.blend.tokenizer_file) if plan.blend.tokenizer else None
    path = ckpt.save(Path(out_dir), model=student, manifest=manifest, tokenizer=tokenizer)
    log(f"[prune] FFN {info.manifest['model_shape']['ffn_hidden_size']} -> {target_ffn}: {kept:,} parameters, "
        f"checkpoint {path}")
    return path


def model_shape_of(info: ckpt.CheckpointInfo):
    from .model import get_shape

    s = dict(info.manifest["model_shape"])
    return get_shape(s.pop("name"), **s)
