"""Token losses over (possibly vocabulary-parallel) logits.

The distillation target is a convex combination of one-hot labels, so its cross-entropy is the same
combination of plain cross-entropies against each label: one log-softmax, several gathers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _tp_size() -> int:
    from megatron.core import parallel_state

    return parallel_state.get_tensor_model_parallel_world_size()


def cross_entropies(logits: torch.Tensor, targets: list[torch.Tensor]) -> list[torch.Tensor]:
    """Per-token cross-entropy [B,S] of `logits` [B,S,V(/tp)] against each target id tensor [B,S]."""
    if _tp_size() == 1:
        logp = F.log_softmax(logits.float(), dim=-1)
        return [-logp.gather(-1, t.unsqueeze(-1)).squeeze(-1) for t in targets]
    from megatron.core import tensor_parallel

    # megatron's kernel edits its input in place, hence a fresh copy per target
    return [tensor_parallel.vocab_parallel_cross_entropy(logits.float().clone(), t) for t in targets]


def exact_token_kl(logits: torch.Tensor, ref_logits: torch.Tensor) -> torch.Tensor:
    """Σ_v π(v)·(log π(v) − log π_ref(v)) per position, from full logits [.., V] -> [..]."""
    lp = torch.log_softmax(logits.float(), dim=-1)
    lq = torch.log_softmax(ref_logits.float(), dim=-1)
    return (lp.exp() * (lp - lq)).sum(dim=-1)


def kl_divergences(logits: torch.Tensor, teacher_logits: torch.Tensor, *, temperature: float = 1.0) -> torch.Tensor:
    """Per-token KL(teacher || student) [B,S] between the softmaxes of `teacher_logits` and `logits` [B,S,V] at
    `temperature`, times temperature² (so the gradient's scale does not shrink as the temperature rises).
    Full-vocabulary logits only (one tensor-parallel rank)."""
    if _tp_size() != 1:
        raise NotImplementedError("kl_divergences: vocabulary-parallel logits (tensor parallel > 1) are not supported")
    return exact_token_kl(teacher_logits.float() / temperature, logits.float() / temperature) * temperature ** 2


def masked_mean(per_token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (per_token * mask).sum() / mask.sum().clamp(min=1)


def distillation_loss(logits, labels, teacher_top1, mask, *, teacher_weight: float):
    """Cross-entropy against (1 - w)·onehot(label) + w·onehot(teacher top-1); also returns the label CE."""
    ce_label, ce_teacher = cross_entropies(logits, [labels, teacher_top1])
    loss = masked_mean((1 - teacher_weight) * ce_label + teacher_weight * ce_teacher, mask)
    return loss, masked_mean(ce_label, mask)
