"""The AFM optimizer against a hand computation; μParam groups; schedules; global clipping."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from training.optim import AFMRMSPropMomentum, OptimConfig, WarmupCosine, clip_grad_norm_, param_groups


def reference_steps(blocks, grads, *, lr, wd, schedule, beta1=0.95, beta2=0.95, eps_square=1e-30, threshold=1.0):
    """AXLearn's adastar as its AFM learner sets it (gradient EMA off; g² + eps_square EMA, debiased; raw update
    clipped to RMS `threshold`: u / max(1, sqrt(mean(u²)) / threshold); update EMA not debiased; decoupled
    decay scaled by the schedule), written out in float64 numpy for a list of blocks, one step at a time."""
    theta = [np.array(b, dtype=np.float64) for b in blocks]
    nu = [np.zeros_like(b) for b in theta]
    mu = [np.zeros_like(b) for b in theta]
    out = []
    for count, (step_grads, s) in enumerate(zip(grads, schedule), start=1):
        new = []
        for i, g in enumerate(step_grads):
            g = np.array(g, dtype=np.float64)
            nu[i] = beta2 * nu[i] + (1 - beta2) * (g ** 2 + eps_square)
            nu_hat = nu[i] / (1 - beta2 ** count)
            raw = g / nu_hat ** 0.5
            rms = np.sqrt(np.mean(raw ** 2))
            raw = raw / max(1.0, rms / threshold)
            mu[i] = beta1 * mu[i] + (1 - beta1) * raw
            theta[i] = theta[i] - s * (lr * mu[i] + wd * theta[i])
            new.append(theta[i].copy())
        out.append(new)
    return out


def _run_torch(blocks, grads, schedule, *, lr, wd, update_clip=1.0):
    params = [torch.nn.Parameter(torch.tensor(b, dtype=torch.float64)) for b in blocks]
    opt = AFMRMSPropMomentum([{"params": params, "lr": lr, "weight_decay": wd}], lr=lr, update_clip=update_clip)
    out = []
    for step_grads, s in zip(grads, schedule):
        opt.param_groups[0]["lr"] = lr * s  # what WarmupCosine.apply sets
        opt.param_groups[0]["schedule"] = s
        for p, g in zip(params, step_grads):
            p.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
        out.append([p.detach().numpy().copy() for p in params])
    return out


def test_afm_optimizer_matches_axlearn_adastar_reference():
    rng = np.random.default_rng(0)
    # a 2x2 block, a 64-entry block (where an L2 clip and an RMS clip differ by 8x) and a 1-entry gain
    blocks = [[[1.0, -2.0], [0.5, 3.0]], rng.normal(size=(8, 8)).tolist(), [0.7]]
    grads = [[rng.normal(scale=sc, size=np.shape(b)).tolist() for b, sc in zip(blocks, (0.3, 1.0, 0.01))]
             for _ in range(6)]
    grads[3][1] = np.zeros((8, 8)).tolist()  # a step with no signal for one block (eps_square keeps it finite)
    schedule = [0.2, 0.6, 1.0, 0.9, 0.5, 0.25]
    for threshold in (1.0, 0.3):
        want = reference_steps(blocks, grads, lr=0.1, wd=0.01, schedule=schedule, threshold=threshold)
        got = _run_torch(blocks, grads, schedule, lr=0.1, wd=0.01, update_clip=threshold)
        for w_step, g_step in zip(want, got):
            for w, g in zip(w_step, g_step):
                np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_first_step_by_hand_rms_clip_not_l2():
    # step 1: nu_hat = g² (+1e-30), so raw = sign(g) and rms(raw) = 1 for any block size: no clip at
    # threshold 1, halved at threshold 0.5. Each entry then moves by s·lr·(1 - β1)·raw = 0.1·0.05 = 0.005,
    # for a 100-entry block as for a 1-entry one (an L2 clip would give 0.005 / 10 for the big block).
    g = torch.tensor([3.0, -1e-3] * 50)
    for clip, per_entry in ((1.0, 0.005), (0.5, 0.0025)):
        p = torch.nn.Parameter(torch.zeros(100))
        opt = AFMRMSPropMomentum([{"params": [p], "lr": 0.1, "weight_decay": 0.0}], lr=0.1, update_clip=clip)
        p.grad = g.clone()
        opt.step()
        assert p.detach()[:2].tolist() == pytest.approx([-per_entry, per_entry])
    # step 2 with a gradient 10x the first in one entry only: raw = g / sqrt(nu_hat) is 10/sqrt(0.95·1+0.05·100)·...
    # rms > 1 there, so the block is scaled down to rms exactly 1 before the update EMA
    p = torch.nn.Parameter(torch.zeros(4))
    opt = AFMRMSPropMomentum([{"params": [p], "lr": 1.0, "weight_decay": 0.0}], lr=1.0)
    p.grad = torch.ones(4)
    opt.step()  # m = 0.05
    p.grad = torch.tensor([10.0, 1.0, 1.0, 1.0])
    nu_hat = (0.95 * 0.05 * torch.tensor([1.0] * 4) + 0.05 * p.grad ** 2) / (1 - 0.95 ** 2)
    raw = p.grad / nu_hat.sqrt()
    assert float(raw.pow(2).mean().sqrt()) > 1.0
    raw = raw / raw.pow(2).mean().sqrt()
    before = p.detach().clone()
    opt.step()
    expected_m = 0.95 * 0.05 + 0.05 * raw
    np.testing.assert_allclose((before - p.detach()).numpy(), expected_m.numpy(), rtol=1e-5)


def test_zero_gradient_block_stays_finite():
    # eps = 1e-30 keeps g / sqrt(v) finite (0 / sqrt(1e-30 ...)) for a block that got no gradient signal
    p = torch.nn.Parameter(torch.ones(3))
    opt = AFMRMSPropMomentum([{"params": [p], "lr": 0.1, "weight_decay": 0.0}], lr=0.1)
    p.grad = torch.zeros(3)
    opt.step()
    assert torch.equal(p.detach(), torch.ones(3))


def test_global_clip_scales_all_gradients_together():
    a, b = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(1))
    a.grad, b.grad = torch.tensor([3.0, 0.0]), torch.tensor([4.0])
    norm = clip_grad_norm_([a, b], 1.0)
    assert norm == pytest.approx(5.0)
    assert a.grad.tolist() == pytest.approx([0.6, 0.0]) and b.grad.tolist() == pytest.approx([0.8])


def test_schedule_warmup_then_cosine_to_fraction():
    s = WarmupCosine(warmup_steps=10, total_steps=110, final_fraction=0.005)
    assert s.factor(0) == pytest.approx(0.1)
    assert s.factor(9) == pytest.approx(1.0)
    assert s.factor(60) == pytest.approx(0.005 + 0.995 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert s.factor(110) == pytest.approx(0.005)
    continued = OptimConfig(peak_lr=3e-4, warmup_steps=1000, final_fraction=0.001, weight_decay=1e-5)
    assert continued.schedule(5000).factor(5000) == pytest.approx(0.001)


def test_mup_simple_scales_linear_layers_only():
    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = torch.nn.Embedding(10, 8)
            self.norm = torch.nn.LayerNorm(8)
            self.fc = torch.nn.Linear(8, 32, bias=False)  # fan_in 8
            self.proj = torch.nn.Linear(32, 8, bias=False)  # fan_in 32

    groups = param_groups(Tiny(), OptimConfig(peak_lr=0.01, weight_decay=1e-4, mup_base_width=16))
    by_mult = {g["lr_mult"]: g for g in groups}
    assert by_mult[2.0]["lr"] == pytest.approx(0.02) and by_mult[0.5]["lr"] == pytest.approx(0.005)
    unscaled = [g for g in groups if g["lr_mult"] == 1.0]
    decay = {g["weight_decay"]: sum(p.numel() for p in g["params"]) for g in unscaled}
    assert decay == {1e-4: 80, 0.0: 16}  # embedding decays, norm gain and bias do not


def test_huge_gradient_norm_skips_the_whole_step():
    from training.trainer import TrainResult, optimizer_step

    model = torch.nn.Linear(4, 3, bias=False)
    cfg = OptimConfig(peak_lr=0.1, grad_clip=1.0, drop_norm=100.0)
    opt = AFMRMSPropMomentum([{"params": list(model.parameters()), "lr": 0.1, "weight_decay": 0.0}], lr=0.1)
    result = TrainResult(run_dir=None, checkpoint=None, steps=3)
    before = model.weight.detach().clone()
    model.weight.grad = torch.full((3, 4), 50.0)  # norm sqrt(12)·50 = 173 >= 100
    assert optimizer_step(model, opt, cfg, result) is False
    assert torch.equal(model.weight.detach(), before) and not opt.state  # no update, no state
    assert result.skipped_steps == 1 and result.grad_norms[-1] == pytest.approx(50 * 12 ** 0.5)
    model.weight.grad = torch.full((3, 4), float("nan"))  # a non-finite norm is dropped too
    assert optimizer_step(model, opt, cfg, result) is False and result.skipped_steps == 2
    model.weight.grad = torch.full((3, 4), 20.0)  # norm 69 < 100: clipped to 1, then stepped
    assert optimizer_step(model, opt, cfg, result) is True
    assert opt.state[model.weight]["step"] == 1 and not torch.equal(model.weight.detach(), before)
    assert result.skipped_steps == 2


def test_trainer_stops_when_every_step_is_dropped(byte_root, tmp_path):
    from manifests.errors import FatalError
    from training.trainer import train

    from .helpers import tiny_cfg

    lines = []
    # drop_norm below any gradient norm of a fresh model: every step is dropped, the weights never move; a run
    # that trained nothing is an error, not a checkpoint of the untouched model (issue 45)
    cfg = tiny_cfg(byte_root, tmp_path / "drop", steps=3, batch=4, optim={
        "name": "afm_rmsprop", "peak_lr": 0.3, "warmup_steps": 1, "mup_base_width": 64, "drop_norm": 1e-6})
    with pytest.raises(FatalError, match="every one of the 3 steps run was skipped"):
        train(cfg, log=lines.append)
    assert sum("step skipped" in line for line in lines) == 3
    assert not list((tmp_path / "drop").glob("step-*"))
    # with max_skipped_in_row 2 it stops at the second skipped step
    lines.clear()
    cfg = tiny_cfg(byte_root, tmp_path / "drop2", steps=5, batch=4, optim={
        "name": "afm_rmsprop", "peak_lr": 0.3, "warmup_steps": 1, "mup_base_width": 64, "drop_norm": 1e-6,
        "max_skipped_in_row": 2})
    with pytest.raises(FatalError, match="2 steps in a row skipped .last at step 2"):
        train(cfg, log=lines.append)
    assert sum("step skipped" in line for line in lines) == 2


def test_block_rms_over_distributed_optimizer_shards_equals_whole_blocks():
    # megatron's distributed optimizer hands each data-parallel rank flat slices of blocks; the GPU path's
    # reducer sums each block's slices (here: two slices of one block, and one whole block, on one rank)
    from training import parallel
    from training.gpu_optim import _DPBlockReduce
    from training.parallel import ParallelConfig

    parallel.setup(ParallelConfig(), seed=1)
    import torch.distributed as dist

    torch.manual_seed(0)
    a, b = torch.nn.Parameter(torch.randn(4, 6)), torch.nn.Parameter(torch.randn(5))
    grads = [(torch.randn(4, 6), torch.randn(5) * 0.01) for _ in range(4)]
    whole = [a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()]
    ref = AFMRMSPropMomentum([{"params": whole, "lr": 0.1, "weight_decay": 0.01}], lr=0.1)
    shards = [a.detach().view(-1)[:10].clone(), a.detach().view(-1)[10:].clone(), b.detach().clone()]
    opt = AFMRMSPropMomentum([{"params": shards, "lr": 0.1, "weight_decay": 0.01}], lr=0.1)
    opt.block_reduce = _DPBlockReduce([a, b], {id(shards[0]): a, id(shards[1]): a, id(shards[2]): b},
                                      dist.group.WORLD)
    for ga, gb in grads:
        whole[0].grad, whole[1].grad = ga.clone(), gb.clone()
        shards[0].grad, shards[1].grad, shards[2].grad = ga.view(-1)[:10].clone(), ga.view(-1)[10:].clone(), gb.clone()
        ref.step()
        opt.step()
    torch.testing.assert_close(torch.cat([shards[0], shards[1]]).view(4, 6), whole[0].detach())
    torch.testing.assert_close(shards[2], whole[1].detach())
