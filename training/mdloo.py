"""MDLOO (AFM report 4.3.3, appendix E.2): the leave-one-out advantage of a KL-penalised reward, and the
mirror-descent trust-region objective of one iteration. Pure tensor functions; the loop is training.rl_loop.

AXLearn (the authors' public code) has no RL or MDLOO module that we could find, so this follows the report.

Iteration k draws n responses y_1..y_n per prompt x from the policy π_θk (the weights at the start of the
iteration). Per response:

    R(x, y) = r(x, y) − β · Σ_t kl_t                          reward, KL-penalised against a frozen reference
    A_i     = R_i − 1/(n−1) · Σ_{j≠i} R_j                     leave-one-out advantage

kl_t is a per-token estimate of KL(π_θk ‖ π_ref) at the sampled token a_t, from log-probs only:
- `k1` (default): log π_θk(a_t) − log π_ref(a_t). Its sum over the response is the log-ratio
  log π_θk(y|x)/π_ref(y|x), the penalty the report writes in R; unbiased for the sequence KL, but a single
  token's value can be negative.
- `k3`: (ρ − 1) − log ρ with ρ = π_ref(a_t)/π_θk(a_t) (Schulman's estimator): also unbiased, never negative,
  lower variance when the two policies are close.
Both need only the sampled tokens' log-probs, so they cost the same at any vocabulary size; the exact
per-token KL over the vocabulary is computed for monitoring (`exact_token_kl`).

The update (report eq. 8) maximises, over several inner steps on the same samples,

    E_{y~π_θk}[ π_θ(y|x)/π_θk(y|x) · A(x, y) ] − γ · KL(π_θ ‖ π_θk)

- `ratio: token` (default) uses Σ_t ρ_t·A with per-token ratios ρ_t = π_θ(a_t)/π_θk(a_t): the same gradient
  as the sequence ratio at θ = θk (its first-order expansion) without the product of T ratios, which is
  numerically wild for long responses; `ratio: sequence` uses exp(Σ_t log ρ_t)·A as written.
- The trust region's KL(π_θ ‖ π_θk) is a sum over the response's tokens of
  `sampled` (default): ρ_t·log ρ_t − ρ_t + 1 at the sampled token. Since a_t ~ π_θk,
  E[ρ log ρ] = KL(π_θ ‖ π_θk) and E[ρ − 1] = 0, so this is unbiased, never negative, and its gradient is 0
  at θ = θk: the first inner step is the plain advantage step, later ones are pulled back. Sampled-token
  log-probs only, so it scales to a 49k vocabulary;
  `full`: the exact Σ_v π_θ(v)·(log π_θ(v) − log π_θk(v)) at each visited context (needs π_θk's full
  log-softmax: small vocabularies).
It is a different KL from the reward's: it keeps each iteration near its own start, not near the reference.
No clipping anywhere (this is not PPO).

Normalisation: per response the objective is a sum over its tokens, and the batch loss is the mean over
responses (the sequence-level objective of eq. 8). Rollouts may be up to `max_staleness` policy versions old
(training.rl_loop); with `behaviour_logp` given, the advantage term of each token is weighted by the
truncated importance weight min(1, π_θk(a_t)/μ(a_t)) (μ: the policy that sampled it), which is 1 on-policy.
"""

from __future__ import annotations

import torch

from manifests.errors import ConfigError

from .losses import exact_token_kl  # noqa: F401 -- the monitoring KL (rl_loop, tests), shared with distillation

KL_ESTIMATORS = ("k1", "k3")
TRUST_KLS = ("sampled", "full")
RATIOS = ("token", "sequence")


def leave_one_out_advantage(rewards: torch.Tensor) -> torch.Tensor:
    """[P, n] rewards of n responses per prompt -> A_i = R_i − mean_{j≠i} R_j (same shape)."""
    if rewards.dim() != 2 or rewards.shape[1] < 2:
        raise ConfigError(f"leave-one-out needs rewards [prompts, n >= 2]; got shape {tuple(rewards.shape)}")
    n = rewards.shape[1]
    others = (rewards.sum(dim=1, keepdim=True) - rewards) / (n - 1)
    return rewards - others


def token_kl(logp: torch.Tensor, logp_ref: torch.Tensor, estimator: str = "k1") -> torch.Tensor:
    """Per-token estimate of KL(π ‖ π_ref) at tokens sampled from π, from their log-probs under both."""
    if estimator == "k1":
        return logp - logp_ref
    if estimator == "k3":
        log_rho = logp_ref - logp
        return torch.expm1(log_rho) - log_rho
    raise ConfigError(f"mdloo.kl_estimator must be one of {KL_ESTIMATORS}; got {estimator!r}")


def penalised_rewards(task_rewards: torch.Tensor, logp: torch.Tensor, logp_ref: torch.Tensor,
                      mask: torch.Tensor, *, beta: float, estimator: str = "k1") -> tuple[torch.Tensor, torch.Tensor]:
    """R = r − β·Σ_t kl_t over the response tokens (mask), and the per-response KL estimate Σ_t kl_t."""
    kl = (token_kl(logp, logp_ref, estimator) * mask).sum(dim=-1)
    return task_rewards - beta * kl, kl


def mirror_descent_loss(logp: torch.Tensor, logp_k: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                        *, gamma: float, ratio: str = "token", trust_kl: str = "sampled",
                        logp_full: torch.Tensor | None = None, logp_k_full: torch.Tensor | None = None,
                        behaviour_logp: torch.Tensor | None = None) -> tuple[torch.Tensor, dict]:
    """Negated eq. 8 objective, to minimise. logp / logp_k / behaviour_logp: [N, T] log-probs of the sampled
    tokens under π_θ (with grad), π_θk and the sampler; advantages [N]; mask [N, T] response tokens;
    logp_full / logp_k_full: [N, T, V] log-softmax, for trust_kl='full'."""
    if ratio not in RATIOS:
        raise ConfigError(f"mdloo.ratio must be one of {RATIOS}; got {ratio!r}")
    if trust_kl not in TRUST_KLS:
        raise ConfigError(f"mdloo.trust_kl must be one of {TRUST_KLS}; got {trust_kl!r}")
    mask = mask.to(logp.dtype)
    log_rho = (logp - logp_k.detach()) * mask
    weight = torch.ones_like(logp)
    if behaviour_logp is not None:
        weight = torch.exp(torch.clamp(logp_k - behaviour_logp, max=0.0)).detach()
    adv = advantages.detach().to(logp.dtype)
    if ratio == "token":
        surrogate = (torch.exp(log_rho) * weight * mask).sum(dim=-1) * adv
    else:
        seq_weight = (torch.log(weight) * mask).sum(dim=-1).exp()
        surrogate = torch.exp(log_rho.sum(dim=-1)) * seq_weight * adv
    if trust_kl == "sampled":
        rho = torch.exp(log_rho)
        kl_tok = rho * log_rho - rho + 1.0
    else:
        if logp_full is None or logp_k_full is None:
            raise ConfigError("mdloo.trust_kl 'full' needs the full log-softmax of π_θ and π_θk")
        kl_tok = (logp_full.exp() * (logp_full - logp_k_full.detach())).sum(dim=-1)
    trust = (kl_tok * mask).sum(dim=-1)
    objective = surrogate - gamma * trust
    loss = -objective.mean()
    figures = {"surrogate": float(surrogate.detach().mean()), "trust_kl": float(trust.detach().mean()),
               "ratio_max": float(torch.exp(log_rho.detach()).max())}
    return loss, figures
