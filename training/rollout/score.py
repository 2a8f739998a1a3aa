"""Teacher-forced log-probs of given responses under a model: the reference / old-policy log-probs of RL and
of iTeC's cache. Right-padded micro-batches under the default causal mask (a real token never attends to a
later pad), so each row equals its sequence run alone."""

from __future__ import annotations

import torch


def response_logprobs(model, pairs: list[tuple[list[int], list[int]]], *, micro_batch: int = 16,
                      grad: bool = False) -> list[torch.Tensor]:
    """For each (prompt_ids, response_ids): [len(response)] float32 log π(response_t | prompt, response_<t)."""
    out: list[torch.Tensor] = []
    dev = next(model.parameters()).device
    ctx = torch.enable_grad() if grad else torch.no_grad()
    with ctx:
        for b in range(0, len(pairs), micro_batch):
            chunk = pairs[b: b + micro_batch]
            seqs = [list(p) + list(r) for p, r in chunk]
            width = max(map(len, seqs))
            tokens = torch.zeros((len(seqs), width), dtype=torch.long, device=dev)
            for i, s in enumerate(seqs):
                tokens[i, : len(s)] = torch.tensor(s, device=dev)
            pos = torch.arange(width, device=dev)[None].expand_as(tokens)
            logp = torch.log_softmax(model(tokens, pos, None, runtime_gather_output=True).float(), dim=-1)
            for i, (p, r) in enumerate(chunk):
                if not r:
                    out.append(torch.zeros(0, device=dev))
                    continue
                rows = logp[i, len(p) - 1: len(p) - 1 + len(r)]
                out.append(rows.gather(-1, torch.tensor(list(r), device=dev)[:, None])[:, 0])
    return out
