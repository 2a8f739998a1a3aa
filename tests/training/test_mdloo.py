"""MDLOO's pieces against independent hand computations: the leave-one-out advantage, the KL estimators,
the KL-penalised reward and the mirror-descent objective (with its trust-region KL)."""

from __future__ import annotations

import math

import pytest
import torch

from manifests.errors import ConfigError
from training.mdloo import (exact_token_kl, leave_one_out_advantage, mirror_descent_loss, penalised_rewards,
                            token_kl)


def test_leave_one_out_advantage_by_hand():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.5, 0.5], [3.0, -1.0, 2.0, 0.0]])
    got = leave_one_out_advantage(r)
    want = []
    for row in r.tolist():
        want.append([row[i] - sum(row[j] for j in range(4) if j != i) / 3 for i in range(4)])
    assert torch.allclose(got, torch.tensor(want), atol=1e-6)
    assert abs(float(got[0, 0]) - 2 / 3) < 1e-6 and abs(float(got[2, 1]) - (-1 - 5 / 3)) < 1e-6
    assert torch.all(got[1] == 0)  # all equal rewards: no signal
    with pytest.raises(ConfigError, match="n >= 2"):
        leave_one_out_advantage(torch.ones(3, 1))


def test_kl_estimators_by_hand_and_unbiased():
    lp, lq = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    assert abs(float(token_kl(lp, lq, "k1")) - math.log(2)) < 1e-6
    assert abs(float(token_kl(lp, lq, "k3")) - (0.5 - 1 - math.log(0.5))) < 1e-6  # rho = 0.25/0.5
    # both are unbiased for KL(p || q) when the tokens are drawn from p; k3 is never negative
    p = torch.tensor([0.6, 0.3, 0.1])
    q = torch.tensor([0.2, 0.5, 0.3])
    kl = sum(float(a) * math.log(float(a) / float(b)) for a, b in zip(p, q))
    g = torch.Generator().manual_seed(0)
    draws = torch.multinomial(p, 200_000, replacement=True, generator=g)
    for est in ("k1", "k3"):
        v = token_kl(p.log()[draws], q.log()[draws], est)
        assert abs(float(v.mean()) - kl) < 0.01, est
    assert float(token_kl(p.log()[draws], q.log()[draws], "k3").min()) >= 0
    assert float(exact_token_kl(p.log(), q.log())) == pytest.approx(kl, abs=1e-6)
    with pytest.raises(ConfigError):
        token_kl(lp, lq, "k2")


def test_penalised_reward_by_hand():
    logp = torch.tensor([[-1.0, -0.5, -2.0], [-0.2, -0.1, -3.0]])
    ref = torch.tensor([[-1.5, -0.5, -1.0], [-0.1, -0.4, -9.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    r = torch.tensor([1.0, 0.0])
    got, kl = penalised_rewards(r, logp, ref, mask, beta=0.1, estimator="k1")
    kl0 = (-1.0 + 1.5) + (-0.5 + 0.5)  # third token masked out
    kl1 = (-0.2 + 0.1) + (-0.1 + 0.4) + (-3.0 + 9.0)
    assert torch.allclose(kl, torch.tensor([kl0, kl1]))
    assert torch.allclose(got, torch.tensor([1.0 - 0.1 * kl0, 0.0 - 0.1 * kl1]))


def _hand_objective(logp, logp_k, adv, mask, gamma, ratio, behaviour=None):
    """Plain-Python eq. 8 per response, averaged: Σ_t w_t ρ_t A − γ Σ_t (ρ_t log ρ_t − ρ_t + 1)."""
    total = 0.0
    for i in range(len(logp)):
        sur, trust, log_seq, log_w = 0.0, 0.0, 0.0, 0.0
        for t in range(len(logp[i])):
            if not mask[i][t]:
                continue
            lr = logp[i][t] - logp_k[i][t]
            w = 1.0 if behaviour is None else min(1.0, math.exp(logp_k[i][t] - behaviour[i][t]))
            sur += w * math.exp(lr) * adv[i]
            log_seq += lr
            log_w += math.log(w)
            trust += math.exp(lr) * lr - math.exp(lr) + 1
        if ratio == "sequence":
            sur = math.exp(log_seq + log_w) * adv[i]
        total += sur - gamma * trust
    return -total / len(logp)


@pytest.mark.parametrize("ratio", ["token", "sequence"])
@pytest.mark.parametrize("stale", [False, True])
def test_mirror_descent_loss_by_hand(ratio, stale):
    logp = [[-1.0, -0.7, -2.0], [-0.3, -1.2, -0.9]]
    logp_k = [[-1.2, -0.6, -2.0], [-0.5, -1.0, -0.1]]
    behaviour = [[-1.0, -0.9, -2.0], [-0.5, -1.3, -0.2]]
    adv = [0.75, -0.4]
    mask = [[1, 1, 0], [1, 1, 1]]
    want = _hand_objective(logp, logp_k, adv, mask, 0.3, ratio, behaviour if stale else None)
    t = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    loss, figs = mirror_descent_loss(t(logp), t(logp_k), t(adv), t(mask), gamma=0.3, ratio=ratio,
                                     behaviour_logp=t(behaviour) if stale else None)
    assert abs(float(loss) - want) < 1e-12
    assert figs["trust_kl"] > 0


def test_trust_region_gradient_is_zero_at_the_start_and_the_full_kl_matches():
    torch.manual_seed(0)
    logp_k = torch.log_softmax(torch.randn(2, 3, 5, dtype=torch.float64), -1)
    labels = torch.tensor([[1, 4, 0], [2, 2, 3]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], dtype=torch.float64)
    adv = torch.tensor([0.5, -1.5], dtype=torch.float64)
    logits = logp_k.clone().requires_grad_(True)  # θ = θk
    for trust in ("sampled", "full"):
        lp_full = torch.log_softmax(logits, -1)
        lp = lp_full.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
        lpk = logp_k.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
        loss, _ = mirror_descent_loss(lp, lpk, adv, mask, gamma=5.0, trust_kl=trust, logp_full=lp_full,
                                      logp_k_full=logp_k)
        (g,) = torch.autograd.grad(loss, lp)
        # d(-mean_i Σ_t ρ_t A_i)/d logp = -A_i ρ_t / N with ρ = 1; the trust KL adds nothing at θ = θk
        assert torch.allclose(g, -(adv[:, None] * mask) / 2)
    # the 'full' trust KL is Σ_v π(v) log(π(v)/π_k(v)) per visited context, summed over response tokens
    other = torch.log_softmax(torch.randn(2, 3, 5, dtype=torch.float64), -1)
    lp = other.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    lpk = logp_k.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    _, figs = mirror_descent_loss(lp, lpk, adv, mask, gamma=1.0, trust_kl="full", logp_full=other,
                                  logp_k_full=logp_k)
    hand = 0.0
    for i in range(2):
        for t in range(3):
            if mask[i, t]:
                hand += sum(math.exp(float(other[i, t, v])) * float(other[i, t, v] - logp_k[i, t, v])
                            for v in range(5))
    assert abs(figs["trust_kl"] - hand / 2) < 1e-9


def test_sampled_trust_kl_is_unbiased_for_kl_to_the_iteration_start():
    pk = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    p = torch.tensor([0.4, 0.4, 0.2], dtype=torch.float64)
    kl = float((p * (p / pk).log()).sum())  # KL(π_θ || π_θk)
    g = torch.Generator().manual_seed(1)
    a = torch.multinomial(pk, 100_000, replacement=True, generator=g).view(-1, 1)  # tokens from π_θk
    _, figs = mirror_descent_loss(p.log()[a], pk.log()[a], torch.zeros(len(a), dtype=torch.float64),
                                  torch.ones_like(a, dtype=torch.float64), gamma=1.0)
    assert abs(figs["trust_kl"] - kl) < 3e-3
