"""The GPU packing route (megatron PackedSeqParams, qkv_format thd, for Transformer Engine attention) against
the CPU route (explicit block-diagonal causal mask): the same segments, the same logits and loss.

TE is not installed on this CPU machine, so the attention that consumes PackedSeqParams is stood in for by a
wrapper that turns cu_seqlens back into a mask (written here, from the segment boundaries alone); what is
checked is everything around it: the boundaries, the flattening to one row and back, and the loss."""

from __future__ import annotations

import torch

from training import parallel
from training.chat import ByteTokenizer, tokenize
from training.model import build_model, get_shape
from training.packing import collate, cu_seqlens, pack, packed_seq_params
from training.post_loop import forward
from training.sft import sft_loss

from .test_sft import CONVS


def _mask_from_cu(cu: torch.Tensor, total: int) -> torch.Tensor:
    """[1,1,T,T] True = masked: position i sees j iff same segment and j <= i."""
    seg = torch.searchsorted(cu[1:].long(), torch.arange(total), right=True)
    i, j = torch.arange(total)[:, None], torch.arange(total)[None, :]
    allowed = (seg[:, None] == seg[None, :]) & (j <= i)
    return (~allowed)[None, None]


class _MaskedFromPacked(torch.nn.Module):
    """Stands in for TE's thd attention: the local model with the mask the segments define."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.seen = None

    def forward(self, tokens, position_ids, attention_mask, packed_seq_params=None):
        assert attention_mask is None and tokens.shape[0] == 1 and packed_seq_params.qkv_format == "thd"
        self.seen = packed_seq_params
        return self.model(tokens, position_ids, _mask_from_cu(packed_seq_params.cu_seqlens_q, tokens.shape[1]))


def _packs():
    toks = [tokenize(c, ByteTokenizer(), where=str(i)) for i, c in enumerate(CONVS * 2)]
    packs, _ = pack(toks, 320)
    assert len(packs) >= 2 and any(len(p.lengths) > 1 for p in packs)
    return packs


def test_cu_seqlens_are_the_conversation_boundaries_and_padding_tails():
    packs = _packs()
    cu = cu_seqlens(packs).tolist()
    want, at = [0], 0
    for p in packs:
        for n in p.lengths:
            at += n
            want.append(at)
        pad = len(p.tokens) - sum(p.lengths)
        if pad:
            at += pad
            want.append(at)
    assert cu == want and cu[-1] == sum(len(p.tokens) for p in packs)
    params = packed_seq_params(cu_seqlens(packs))
    assert params.cu_seqlens_q.dtype == torch.int32 and params.max_seqlen_q == max(b - a for a, b in zip(cu, cu[1:]))
    # the mask the segments define equals the block-diagonal mask of each pack, on every position carrying a
    # conversation (padding differs: a segment of its own here, the diagonal on the mask path; it has no loss)
    full = _mask_from_cu(cu_seqlens(packs), cu[-1])[0, 0]
    ref = collate(packs)["attention_mask"][:, 0]
    s = len(packs[0].tokens)
    for b, p in enumerate(packs):
        n = sum(p.lengths)
        assert torch.equal(full[b * s: b * s + n, b * s: b * s + n], ref[b, :n, :n])
        assert not (~full[b * s: b * s + n]).any(dim=0)[:b * s].any()  # nothing seen in earlier packs


def test_thd_forward_gives_the_mask_path_logits_and_loss():
    parallel.setup(parallel.ParallelConfig(), seed=11)
    parallel.seed_everything(11)
    model = build_model(get_shape("tiny", vocab_size=256), seq_length=640).eval()
    packs = _packs()
    masked, thd = collate(packs), collate(packs, thd=True)
    assert "attention_mask" not in thd and "cu_seqlens" in thd
    stand_in = _MaskedFromPacked(model)
    with torch.no_grad():
        ref = forward(model, masked)
        got = forward(stand_in, thd)
    assert stand_in.seen is not None and got.shape == ref.shape
    keep = masked["loss_mask"].bool()
    assert torch.allclose(got[keep], ref[keep], atol=1e-5)
    assert abs(float(sft_loss(got, thd["labels"], thd["loss_mask"]))
               - float(sft_loss(ref, masked["labels"], masked["loss_mask"]))) < 1e-6
