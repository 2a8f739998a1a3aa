"""The AFM optimizer against a hand computation; μParam groups; schedules; global clipping."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from training.optim import AFMRMSPropMomentum, OptimConfig, WarmupCosine, clip_grad_norm_, param_groups


def reference_steps(theta, grads, *, lr, wd, schedule, beta1=0.95, beta2=0.95, eps=1e-30):
    """Section 3.2.4 of the report, written out in numpy (float64), one block."""
    theta = np.array(theta, dtype=np.float64)
    v = np.zeros_like(theta)
    m = np.zeros_like(theta)
    out = []
    for t, (g, s) in enumerate(zip(grads, schedule), start=1):
        g = np.array(g, dtype=np.float64)
        v = beta2 * v + (1 - beta2) * (g * g + eps)
        u = g / np.sqrt(v / (1 - beta2 ** t))
        u = u * min(1.0, 1.0 / np.linalg.norm(u))
        m = beta1 * m + (1 - beta1) * u
        theta = theta - s * (lr * m + wd * theta)
        out.append(theta.copy())
    return out


def test_afm_optimizer_matches_hand_computation():
    theta0 = [[1.0, -2.0], [0.5, 3.0]]
    grads = [[[0.3, -0.1], [0.02, 0.5]], [[-0.2, 0.4], [0.1, 0.1]], [[0.05, 0.05], [-0.3, 0.0]],
             [[1e-3, -2.0], [0.7, 0.2]]]
    schedule = [1.0, 0.8, 0.5, 0.25]
    lr, wd = 0.1, 0.01
    p = torch.nn.Parameter(torch.tensor(theta0, dtype=torch.float64))
    opt = AFMRMSPropMomentum([{"params": [p], "lr": lr, "weight_decay": wd}], lr=lr)
    want = reference_steps(theta0, grads, lr=lr, wd=wd, schedule=schedule)
    for g, s, expected in zip(grads, schedule, want):
        opt.param_groups[0]["lr"] = lr * s  # what WarmupCosine.apply sets
        opt.param_groups[0]["schedule"] = s
        p.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
        np.testing.assert_allclose(p.detach().numpy(), expected, rtol=1e-6, atol=1e-7)
    # step 1 by hand: v̂ = g² so u = sign(g), ‖u‖ = 2 -> u/2; m = 0.05·u/2; θ -= 0.1·m + 0.01·θ
    assert want[0][0][0] == pytest.approx(1.0 - 0.1 * 0.05 * 0.5 - 0.01 * 1.0)
    assert want[0][0][1] == pytest.approx(-2.0 + 0.1 * 0.05 * 0.5 + 0.01 * 2.0)


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
