"""Inference-only core attention for megatron-core's local layer spec: torch's scaled_dot_product_attention
(fused on CPU and GPU) in place of megatron's DotProductAttention, which materialises [B, heads, Sq, Sk] scores
and a separate softmax (on CPU that softmax was 40% of a forward here). Same parameters (none), same
inputs and outputs, so a checkpoint loads unchanged; tests check logits equal the stock module's.

Shapes: query [Sq, B, heads, d], key/value [Sk, B, groups, d] -> context [Sq, B, heads * d].
Masking: an explicit boolean mask (True = masked, megatron's convention) if given; else causal with the
query block aligned to the end of the keys (prefill: Sq == Sk; KV-cache decode: Sq < Sk).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from megatron.core.transformer.dot_product_attention import DotProductAttention

from .gpt import afm_layer_spec, transformer_config
from .shapes import get_shape


class SDPACoreAttention(DotProductAttention):
    def forward(self, query, key, value, attention_mask, attn_mask_type=None, attention_bias=None,
                packed_seq_params=None):
        if packed_seq_params is not None or attention_bias is not None:
            raise NotImplementedError("SDPACoreAttention: no packed sequences or attention bias")
        sq, b, heads, d = query.shape
        sk, groups = key.shape[0], key.shape[2]
        q = query.permute(1, 2, 0, 3)  # [B, heads, Sq, d]
        # grouped-query: query head i reads KV group i // (heads / groups), as enable_gqa does (no copies)
        k, v = key.permute(1, 2, 0, 3), value.permute(1, 2, 0, 3)
        gqa = {"enable_gqa": heads != groups}
        if attention_mask is not None:
            allowed = ~attention_mask.bool()
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=self.softmax_scale, **gqa)
        elif sq == sk:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.softmax_scale, **gqa)
        else:
            allowed = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril(diagonal=sk - sq)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=self.softmax_scale, **gqa)
        return out.permute(2, 0, 1, 3).reshape(sq, b, heads * d)


def sdpa_layer_spec():
    """training.model.gpt's local AFM spec with SDPACoreAttention as core attention."""
    spec = copy.deepcopy(afm_layer_spec("local"))
    spec.submodules.self_attention.submodules.core_attention = SDPACoreAttention
    return spec


def build_eval_model(info, *, seq_length: int):
    """The checkpoint's model (shape, RoPE base from its manifest) with SDPA core attention, weights loaded."""
    from megatron.core.models.gpt import GPTModel

    from .. import checkpoint as ckpt
    from ..parallel import device

    shape = get_shape(info.manifest["model_shape"]["name"],
                      **{k: v for k, v in info.manifest["model_shape"].items() if k != "name"})
    model = GPTModel(config=transformer_config(shape), transformer_layer_spec=sdpa_layer_spec(),
                     vocab_size=shape.vocab_size, max_sequence_length=seq_length,
                     share_embeddings_and_output_weights=True, position_embedding_type="rope",
                     rotary_base=info.manifest["rotary_base"], parallel_output=False).to(device())
    ckpt.load_weights(info, model)
    return model
