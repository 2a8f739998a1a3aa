"""Packing several tokenized conversations into one sequence, with no attention across them.

A pack of length S holds conversations back to back, then padding. For each conversation of n tokens,
inputs are ids[:-1] and targets ids[1:] (n - 1 positions), position ids restart at 0, and the attention
mask is block-diagonal causal: a token sees earlier tokens of its own conversation only. megatron's
convention: True = masked out. Padding positions see only themselves (no all-masked softmax rows) and
carry no loss. On GPU with Transformer Engine kernels the same boundaries become megatron's
PackedSeqParams (`cu_seqlens` over the micro-batch flattened to one row, qkv_format "thd"): no S x S mask
is built and positions restart per segment inside TE's RoPE and attention (`collate(..., thd=True)`,
`post_loop.forward`). The CPU (local kernels) path gets the explicit mask.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from manifests.errors import ConfigError


@dataclass
class Pack:
    tokens: np.ndarray  # [S] input ids
    labels: np.ndarray  # [S] target ids
    loss_mask: np.ndarray  # [S] float 0/1
    position_ids: np.ndarray  # [S]
    lengths: list[int] = field(default_factory=list)  # positions per conversation, in order
    sources: list[int] = field(default_factory=list)  # index of each conversation in the input list


def pack(samples, seq_length: int, *, pad_id: int = 0) -> tuple[list[Pack], dict[str, int]]:
    """Greedy in order: a conversation goes into the current pack if it fits, else starts a new one.
    `samples`: objects with `ids` and `trainable` (training.chat.Tokenized). Conversations longer than
    seq_length + 1 tokens are cut to fit (counted in the returned counters)."""
    if seq_length < 2:
        raise ConfigError(f"packing: seq_length must be >= 2; got {seq_length}")
    packs: list[Pack] = []
    counters = {"conversations": 0, "cut_to_seq_length": 0, "dropped_no_loss_after_cut": 0}
    cur: list[tuple[int, np.ndarray, np.ndarray]] = []
    used = 0

    def flush():
        nonlocal cur, used
        if cur:
            packs.append(_assemble(cur, seq_length, pad_id))
        cur, used = [], 0

    for i, s in enumerate(samples):
        ids, trainable = s.ids, s.trainable
        if len(ids) - 1 > seq_length:
            ids, trainable = ids[: seq_length + 1], trainable[: seq_length + 1]
            counters["cut_to_seq_length"] += 1
            if not trainable[1:].any():
                counters["dropped_no_loss_after_cut"] += 1
                continue
        if len(ids) < 2:
            continue
        n = len(ids) - 1
        if used + n > seq_length:
            flush()
        cur.append((i, ids, trainable))
        used += n
        counters["conversations"] += 1
    flush()
    return packs, counters


def _assemble(items, seq_length: int, pad_id: int) -> Pack:
    tokens = np.full(seq_length, pad_id, dtype=np.int64)
    labels = np.full(seq_length, pad_id, dtype=np.int64)
    loss_mask = np.zeros(seq_length, dtype=np.float32)
    position_ids = np.arange(seq_length, dtype=np.int64)  # padding keeps increasing positions (unused)
    at, lengths, sources = 0, [], []
    for i, ids, trainable in items:
        n = len(ids) - 1
        tokens[at: at + n] = ids[:-1]
        labels[at: at + n] = ids[1:]
        loss_mask[at: at + n] = trainable[1:]
        position_ids[at: at + n] = np.arange(n)
        at += n
        lengths.append(n)
        sources.append(i)
    return Pack(tokens, labels, loss_mask, position_ids, lengths, sources)


def attention_mask(lengths: list[int], seq_length: int) -> torch.Tensor:
    """[S, S] bool, True = masked: block-diagonal causal over the conversations, then padding on the
    diagonal only."""
    allowed = torch.zeros(seq_length, seq_length, dtype=torch.bool)
    at = 0
    for n in lengths:
        allowed[at: at + n, at: at + n] = torch.ones(n, n, dtype=torch.bool).tril()
        at += n
    idx = torch.arange(at, seq_length)
    allowed[idx, idx] = True
    return ~allowed


def collate(packs: list[Pack], *, thd: bool = False) -> dict[str, torch.Tensor]:
    """A micro-batch: tokens/labels/position_ids [B,S], loss_mask [B,S], and either attention_mask
    [B,1,S,S] (the explicit block-diagonal mask, local kernels) or, with `thd`, cu_seqlens [n+1] int32
    (the boundaries of the micro-batch flattened to one row, for megatron's PackedSeqParams; no S x S
    mask is built)."""
    seq = len(packs[0].tokens)
    batch = {
        "tokens": torch.from_numpy(np.stack([p.tokens for p in packs])),
        "labels": torch.from_numpy(np.stack([p.labels for p in packs])),
        "loss_mask": torch.from_numpy(np.stack([p.loss_mask for p in packs])),
        "position_ids": torch.from_numpy(np.stack([p.position_ids for p in packs])),
    }
    if thd:
        batch["cu_seqlens"] = cu_seqlens(packs)
    else:
        batch["attention_mask"] = torch.stack([attention_mask(p.lengths, seq) for p in packs]).unsqueeze(1)
    return batch


def uses_thd(parallel_cfg) -> bool:
    """The GPU route: Transformer Engine's fused attention takes packed sequences as THD + cu_seqlens
    (megatron-core's local attention takes only an explicit mask, so CPU runs keep the mask)."""
    return parallel_cfg.kernels == "transformer_engine" and torch.cuda.is_available()


def cu_seqlens(packs: list[Pack]) -> torch.Tensor:
    """Cumulative sequence boundaries of the packs laid end to end in one row of B·S positions: every
    conversation is a segment, and each pack's padding tail is a segment of its own (it attends only
    within itself and carries no loss)."""
    bounds = [0]
    for p in packs:
        start = bounds[-1]
        for n in p.lengths:
            bounds.append(bounds[-1] + n)
        if bounds[-1] < start + len(p.tokens):
            bounds.append(start + len(p.tokens))
    return torch.tensor(bounds, dtype=torch.int32)


def packed_seq_params(cu: torch.Tensor):
    """megatron-core's PackedSeqParams (qkv_format "thd") for `cu_seqlens` (on the model's device)."""
    from megatron.core.packed_seq_params import PackedSeqParams

    longest = int((cu[1:] - cu[:-1]).max())
    return PackedSeqParams(qkv_format="thd", cu_seqlens_q=cu, cu_seqlens_kv=cu, max_seqlen_q=longest,
                           max_seqlen_kv=longest)


def describe(pack_: Pack, decode) -> str:
    """A pack for the eye: each conversation on its own, spans that carry no loss in [[...]], trained
    spans as is; ends with the share of positions that carry loss."""
    out, at = [], 0
    for k, n in enumerate(pack_.lengths):
        toks, mask = pack_.labels[at: at + n], pack_.loss_mask[at: at + n]
        text, run, cur = [], [], None
        for t, m in zip(toks, mask):
            if cur is not None and bool(m) != cur:
                text.append(_span(run, cur, decode))
                run = []
            run.append(int(t))
            cur = bool(m)
        if run:
            text.append(_span(run, cur, decode))
        out.append(f"--- conversation {k + 1} (positions {at}..{at + n - 1}, position ids 0..{n - 1}) ---\n"
                   + "".join(text))
        at += n
    pad = len(pack_.tokens) - at
    trained = float(pack_.loss_mask.sum())
    out.append(f"--- padding: {pad} positions; {int(trained)} of {len(pack_.tokens)} positions carry loss; "
               f"[[...]] = masked (no loss) ---")
    return "\n".join(out)


def _span(ids, trained: bool, decode) -> str:
    s = decode(ids)
    return s if trained else f"[[{s}]]"
