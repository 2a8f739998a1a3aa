"""Pure next-token sampling: temperature, nucleus (top-p) truncation, and the two log-probabilities a
rollout records for each sampled token.

- `policy_logprob`: log π(y) from the model's raw logits (temperature 1, no truncation). This is the
  quantity RL objectives (MDLOO's KL and importance terms, DPO references) are written in.
- `sampling_logprob`: log q(y) under the distribution the token was actually drawn from (after temperature
  and top-p); 0.0 for greedy decoding. Off-policy corrections between q and π need both.

Shapes: logits [B, V] float32; everything returns per-row tensors [B].
"""

from __future__ import annotations

import torch


def top_p_mask(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """[B, V] bool, True for tokens kept by nucleus sampling: the smallest most-probable set whose mass
    reaches `top_p` (the token that crosses the threshold is kept; ties broken by token id order of the
    stable sort). top_p >= 1 keeps every token with non-zero probability."""
    if top_p >= 1.0:
        return probs > 0
    sorted_p, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    mass_before = torch.cumsum(sorted_p, dim=-1) - sorted_p  # mass of strictly more probable tokens
    keep_sorted = mass_before < top_p
    keep_sorted[..., 0] = True  # the most probable token always survives
    keep = torch.zeros_like(keep_sorted)
    keep.scatter_(-1, order, keep_sorted)
    return keep


def sampling_distribution(logits: torch.Tensor, *, temperature: float, top_p: float) -> torch.Tensor:
    """[B, V] log-probabilities of the distribution sampled from (temperature > 0)."""
    logq = torch.log_softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        keep = top_p_mask(logq.exp(), top_p)
        logq = torch.log_softmax(logq.masked_fill(~keep, float("-inf")), dim=-1)
    return logq


def next_tokens(logits: torch.Tensor, *, temperature: float, top_p: float,
                generators: list[torch.Generator] | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(tokens [B] long, policy_logprob [B], sampling_logprob [B]).

    temperature == 0 is greedy (argmax; the first maximal id on ties). Otherwise each row draws from its own
    generator (one per rollout), so a rollout's tokens do not depend on which other prompts share its batch.
    """
    logits = logits.float()
    logp = torch.log_softmax(logits, dim=-1)
    if temperature == 0:
        tokens = logits.argmax(-1)
        return tokens, logp.gather(-1, tokens[:, None])[:, 0], torch.zeros_like(tokens, dtype=torch.float32)
    logq = sampling_distribution(logits, temperature=temperature, top_p=top_p)
    probs = logq.exp()
    assert generators is not None and len(generators) == len(logits)
    tokens = torch.stack([torch.multinomial(probs[i], 1, generator=g)[0] for i, g in enumerate(generators)])
    return tokens, logp.gather(-1, tokens[:, None])[:, 0], logq.gather(-1, tokens[:, None])[:, 0]
