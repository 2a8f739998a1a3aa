"""Reward model: the megatron GPT (from an SFT checkpoint) with a scalar head at the last non-pad token,
trained with a soft-label Bradley–Terry loss, plus single-sided grading heads (AFM report, E.1).

For a pair at preference level k with target p_k (rm.level_probs, default 0.95/0.85/0.75/0.65 for
significantly/better/slightly/negligibly better) and Δ = r(chosen) − r(rejected):
    loss_BT = −[p_k·log σ(Δ) + (1 − p_k)·log σ(−Δ)]
Grading heads: one MLP classifier per graded property on the same final hidden state; the loss adds
λ·(CE(chosen grade) + CE(rejected grade)) for each head over the pairs that carry that grade.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from manifests.errors import ConfigError

from . import parallel
from .chat import load_tokenizer
from .packing import uses_thd
from .post_loop import build_gpt, data_id, forward, open_post_run, run_loop
from .pref_eval import format_report, pairwise_report
from .prefs import load_pairs, pair_batch


def soft_bt_loss(delta: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Per pair −[p·log σ(Δ) + (1 − p)·log σ(−Δ)]."""
    return -(p * F.logsigmoid(delta) + (1 - p) * F.logsigmoid(-delta))


class RewardModel(torch.nn.Module):
    def __init__(self, gpt, *, hidden: int, grading_heads=(), head_hidden: int = 0, pooling: str = "last",
                 head_lr_mult: float = 1.0):
        super().__init__()
        self.gpt = gpt
        self.config = gpt.config  # what megatron's Float16Module / DDP read on the GPU path
        self.pooling = pooling
        self.score = torch.nn.Linear(hidden, 1)
        torch.nn.init.zeros_(self.score.weight)  # Δ = 0 at the start: every pair at σ = 0.5
        torch.nn.init.zeros_(self.score.bias)
        width = head_hidden or hidden
        self.grading = torch.nn.ModuleDict({
            name: torch.nn.Sequential(torch.nn.Linear(hidden, width), torch.nn.SiLU(), torch.nn.Linear(width, k))
            for name, k in grading_heads})
        for p in [*self.score.parameters(), *self.grading.parameters()]:
            p.lr_mult = head_lr_mult  # read by optim.param_groups: the heads' rate is peak_lr x this
        self._hidden = None
        gpt.decoder.register_forward_hook(self._keep_hidden)
        # the heads read the final hidden state: no vocabulary logits (a fifth of the FLOPs of a 135M model
        # with a 49k vocabulary, and a [B, S, V] tensor); megatron's GPTModel returns the decoder output
        gpt.post_process = False

    def _keep_hidden(self, _module, _inputs, output):
        self._hidden = output[0] if isinstance(output, tuple) else output  # [S, B, H], after the final norm

    def forward(self, batch: dict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """rewards [B] and grade logits {property: [B, classes]} from each row's pooled final hidden state."""
        pooled = self.pooled(batch).to(self.score.weight.dtype)  # bf16 heads under megatron's Float16Module
        return self.score(pooled).squeeze(-1).float(), {n: head(pooled).float() for n, head in self.grading.items()}

    def pooled(self, batch: dict) -> torch.Tensor:
        """[B, H] float32: each row's final hidden state at its last real token, or the mean over its response
        tokens (`loss_mask`, shifted: position t holds the state after input t, whose target t+1 is a response
        token)."""
        b, s = batch["tokens"].shape
        forward(self.gpt, batch)  # explicit mask, or THD rows flattened to [1, B·S] on the TE path
        h = self._hidden.transpose(0, 1).reshape(b, s, -1).float()  # [B, S, H]
        self._hidden = None
        if self.pooling == "mean":
            w = batch["loss_mask"].to(h.dtype)  # [B, S]
            pooled = (h * w[..., None]).sum(1) / w.sum(1, keepdim=True).clamp_min(1.0)
        else:
            pooled = h[torch.arange(b, device=h.device), batch["last_index"]]
        return pooled

    def sharded_state_dict(self, prefix: str = "", sharded_offsets=(), metadata=None):
        """For megatron's dist_checkpointing (GPU checkpoints): the GPT's own sharded state under `gpt.`,
        the heads (small, replicated on every tensor-parallel rank) as replicated sharded tensors."""
        from megatron.core.transformer.utils import make_sharded_tensors_for_checkpoint

        out = self.gpt.sharded_state_dict(prefix=f"{prefix}gpt.", sharded_offsets=sharded_offsets,
                                          metadata=metadata)
        heads = {k: v for k, v in self.state_dict(keep_vars=True).items() if not k.startswith("gpt.")}
        out.update(make_sharded_tensors_for_checkpoint(heads, prefix, {}, sharded_offsets))
        return out


def grade_targets(items, heads) -> dict[str, torch.Tensor]:
    """{property: [2n]} grade classes of chosen then rejected responses; -100 where a pair has none."""
    out = {}
    for name, k in heads:
        vals = [it.pair.grades_chosen.get(name, -100) for it in items] + \
               [it.pair.grades_rejected.get(name, -100) for it in items]
        for v in vals:
            if v != -100 and not 0 <= int(v) < k:
                raise ValueError(f"grading head {name}: grade {v} outside 0..{k - 1}")
        out[name] = torch.tensor([int(v) for v in vals])
    return out


def fit_soft_bt(d: torch.Tensor, p: torch.Tensor, l2: float) -> torch.Tensor:
    """w [H] minimising mean_i soft_bt_loss(d_i · w, p_i) + l2/2 · |w|² (float64, L-BFGS; convex, so the
    start does not matter). `d` [n, H]: chosen − rejected features; `p` [n]: target P(chosen > rejected)."""
    d, p = d.double(), p.double()
    w = torch.zeros(d.shape[1], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w], lr=1.0, max_iter=500, history_size=20, tolerance_grad=1e-10,
                            tolerance_change=1e-14, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = soft_bt_loss(d @ w, p).mean() + l2 / 2 * (w * w).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    return w.detach()


def probe_fit(d: torch.Tensor, p: torch.Tensor, *, l2_grid, folds: int, seed: int) -> tuple[torch.Tensor, dict]:
    """The linear probe of LP-FT on pair features: each feature scaled by its standard deviation over the
    pairs, the L2 weight with the lowest mean held-out soft-BT loss over `folds` seeded folds (ties: the larger
    weight), then one fit on every pair. Returns (w [H] in the unscaled features' units, a report)."""
    n = d.shape[0]
    if n < 2 * folds:
        raise ConfigError(f"rm.head_init probe: {n} training pairs, fewer than 2 x rm.probe_folds ({folds})")
    d, p = d.double(), p.double()
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    parts = [order[k::folds] for k in range(folds)]
    grid = {}
    for l2 in sorted(set(float(x) for x in l2_grid)):
        losses, right = [], 0.0
        for k, test in enumerate(parts):
            train = torch.cat([q for j, q in enumerate(parts) if j != k])
            scale = d[train].std(0).clamp_min(1e-8)
            z = (d[test] / scale) @ fit_soft_bt(d[train] / scale, p[train], l2)
            losses.append(soft_bt_loss(z, p[test]))
            right += float((z > 0).double().sum() + 0.5 * (z == 0).double().sum())
        grid[l2] = {"cv_loss": float(torch.cat(losses).mean()), "cv_accuracy": right / n}
    best = min(grid, key=lambda l2: (round(grid[l2]["cv_loss"], 12), -l2))
    scale = d.std(0).clamp_min(1e-8)
    w = fit_soft_bt(d / scale, p, best) / scale
    return w, {"pairs": n, "folds": folds, "l2": best, **grid[best],
               "grid": {f"{k:g}": {m: round(v, 4) for m, v in r.items()} for k, r in grid.items()}}


@torch.no_grad()
def probe_head(model: "RewardModel", items, batch_of, *, level_probs: torch.Tensor, micro_batch: int,
               l2_grid, folds: int, seed: int, log=None) -> dict:
    """Set the scalar head from a linear probe on the frozen body (the LP of LP-FT): the pooled states of
    every training pair, chosen − rejected, fitted to the pairs' target probabilities; the bias stays 0 (a
    reward's offset cancels in Δ). Every rank computes the same fit from the same pairs."""
    was_training = model.training
    model.eval()
    diffs, targets = [], []
    every = max(len(items) // 10, micro_batch)
    for at in range(0, len(items), micro_batch):
        if log and at and at // every != (at - micro_batch) // every:
            log(f"probe features: {at} of {len(items)} pairs")
        chunk = items[at: at + micro_batch]
        b = batch_of(chunk)
        h = model.pooled(b).double().cpu()
        diffs.append(h[: len(chunk)] - h[len(chunk):])
        targets.append(level_probs.double()[b["level"].cpu()])
    w, report = probe_fit(torch.cat(diffs), torch.cat(targets), l2_grid=l2_grid, folds=folds, seed=seed)
    model.score.weight.copy_(w.to(model.score.weight)[None])
    model.score.bias.zero_()
    model.train(was_training)
    return report


def rm_loss(rewards, grade_logits, batch, *, level_probs: torch.Tensor, grading_weight: float):
    n = rewards.shape[0] // 2
    delta = rewards[:n] - rewards[n:]
    p = level_probs.to(rewards.device)[batch["level"]]
    loss = soft_bt_loss(delta, p).mean()
    grading = torch.zeros((), device=rewards.device)
    for name, logits in grade_logits.items():
        target = batch["grades"][name]
        if (target != -100).any():
            grading = grading + F.cross_entropy(logits, target, ignore_index=-100)
    return loss + grading_weight * grading, delta, grading


def train_rm(cfg, *, resume: str | None = None, stop_after: int | None = None, log=print):
    parallel.setup(cfg.parallel, seed=cfg.seed)
    rmc = cfg.rm
    tokenizer = load_tokenizer(cfg.tokenizer)
    train, valid, counters = load_pairs(cfg, tokenizer)
    data = data_id(cfg)
    levels = {k: sum(it.pair.level == k for it in train) for k in range(len(rmc.level_probs))}
    log(f"[{cfg.name}] {len(train)} training pairs by level {levels}, {len(valid)} held-out ({counters})")
    gpt = build_gpt(cfg, init_from=cfg.init_from)
    model = RewardModel(gpt, hidden=cfg.model.hidden_size, grading_heads=rmc.grading_heads,
                        head_hidden=rmc.head_hidden, pooling=rmc.pooling,
                        head_lr_mult=rmc.head_lr_mult).to(parallel.device())
    probs = torch.tensor(rmc.level_probs)
    dev = parallel.device()

    def batch_of(items):
        b = {k: v.to(dev) for k, v in pair_batch(items, cfg.seq_length, tokenizer.pad_id,
                                                                  thd=uses_thd(cfg.parallel)).items()}
        b["grades"] = {k: v.to(dev) for k, v in grade_targets(items, rmc.grading_heads).items()}
        return b

    @torch.no_grad()
    def evaluate():
        model.eval()
        deltas, lv, losses = [], [], []
        for at in range(0, len(valid), cfg.micro_batch):
            b = batch_of(valid[at: at + cfg.micro_batch])
            r, g = model(b)
            loss, delta, _ = rm_loss(r, g, b, level_probs=probs, grading_weight=rmc.grading_weight)
            deltas += delta.tolist()
            lv += b["level"].tolist()
            losses.append(float(loss) * len(delta))
        model.train()
        report = pairwise_report(deltas, lv, rmc.level_probs)
        by_source = {}
        for it, d in zip(valid, deltas):
            name = Path(it.pair.source).name
            by_source.setdefault(name, []).append(1.0 if d > 0 else 0.5 if d == 0 else 0.0)
        return {"loss": sum(losses) / max(len(deltas), 1), "accuracy": report["accuracy"],
                "accuracy_ci95": [round(x, 4) for x in report["accuracy_ci95"]],
                "accuracy_by_source": {k: [round(sum(v) / len(v), 4), len(v)] for k, v in by_source.items()},
                "ece_by_level": {k: round(v["ece"], 4) for k, v in report["levels"].items()},
                "accuracy_by_level": {k: round(v["accuracy"], 4) for k, v in report["levels"].items()},
                "report": format_report(report)}

    def loss_fn(m, b):
        r, g = m(b)
        loss, delta, grading = rm_loss(r, g, b, level_probs=probs, grading_weight=rmc.grading_weight)
        return loss, {"accuracy": float((delta.detach() > 0).float().mean()), "grading_ce": float(grading.detach())}

    directory = open_post_run(cfg, data=data, resume=resume)
    try:
        probe = None
        if rmc.head_init == "probe" and directory.resume_from is None:  # a resumed run's head is its checkpoint's
            probe = probe_head(model, train, batch_of, level_probs=probs, micro_batch=cfg.micro_batch,
                               l2_grid=rmc.probe_l2, folds=rmc.probe_folds, seed=cfg.seed,
                               log=lambda m: log(f"[{cfg.name}] {m}"))
            log(f"[{cfg.name}] head from a linear probe on the frozen body: {probe['pairs']} pairs, "
                f"L2 {probe['l2']:g} by {probe['folds']}-fold cross-validation (accuracy {probe['cv_accuracy']:.3f}, "
                f"soft-BT loss {probe['cv_loss']:.4f})")
        start = evaluate()
        pooling = "last non-pad token" if rmc.pooling == "last" else "mean over the response tokens"
        result = run_loop(cfg, model, n_items=len(train),
                          micro_batch_at=lambda idx: batch_of([train[i] for i in idx]), loss_fn=loss_fn,
                          evaluate=evaluate, data=data, resume=resume, stop_after=stop_after, log=log,
                          directory=directory,
                          extra_manifest={"reward_head": pooling, "level_probs": list(rmc.level_probs),
                                          "data_counters": counters,
                                          **({"head_probe": probe} if probe else {})})
    finally:
        directory.close()
    result.evals.insert(0, (0, start))
    log(result.evals[-1][1]["report"])
    return result


def load_reward_model(checkpoint: str):
    """(RewardModel, its PostTrainConfig) from an RM checkpoint (directory or run directory)."""
    from . import checkpoint as ckpt
    from .post_config import from_dict

    info = ckpt.open_checkpoint(checkpoint)
    raw = dict(info.manifest["config"])
    raw["model"] = {"shape": raw["model"].pop("name"), **raw["model"]}
    raw["init_from"] = None
    entry = ckpt.checkpoint_tokenizer(info)  # the copy the checkpoint carries, not the path the config named
    raw["tokenizer"] = "bytes" if entry["kind"] == "bytes" else entry["model_file"]
    cfg = from_dict(raw, where=str(info.directory))
    parallel.setup(cfg.parallel, seed=cfg.seed)
    model = RewardModel(build_gpt(cfg), hidden=cfg.model.hidden_size, grading_heads=cfg.rm.grading_heads,
                        head_hidden=cfg.rm.head_hidden, pooling=cfg.rm.pooling).to(parallel.device())
    ckpt.load_weights(info, model)
    model.eval()
    return model, cfg


@torch.no_grad()
def preference_eval(checkpoint: str, path: str, *, fmt: str = "auto", max_records: int | None = None,
                    micro_batch: int = 8) -> dict:
    """Held-out figures of an RM checkpoint on a pair file: pairwise_report (accuracy and ECE per level)
    plus a printable table under "table". For `eval model RM --tasks preference`."""
    import dataclasses

    from .post_config import SourceConfig

    model, cfg = load_reward_model(checkpoint)
    tokenizer = load_tokenizer(cfg.tokenizer)
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(
        cfg.data, sources=(SourceConfig(path=path, format=fmt, max_records=max_records),), valid_fraction=0.5))
    train, valid, _ = load_pairs(dataclasses.replace(cfg, valid_max=10**9), tokenizer)
    items = train + valid  # every pair of the file (the split only orders them)
    deltas, levels = [], []
    for at in range(0, len(items), micro_batch):
        chunk = items[at: at + micro_batch]
        b = {k: v.to(parallel.device()) for k, v in pair_batch(chunk, cfg.seq_length, tokenizer.pad_id,
                                                                                thd=uses_thd(cfg.parallel)).items()}
        r, _ = model(b)
        deltas += (r[: len(chunk)] - r[len(chunk):]).tolist()
        levels += b["level"].tolist()
    report = pairwise_report(deltas, levels, cfg.rm.level_probs)
    report["table"] = format_report(report)
    return report
