"""megatron-core GPTModel assembled from a layer spec: the AFM architecture, and the released models we import.

Common to every shape: pre-norm RMSNorm, grouped-query attention, SwiGLU MLP (gated linear unit + SiLU),
RoPE (rotate-half), no bias on the output projection or the MLP. The switches in `ModelShape` (shapes.py) add
or remove what differs: RMSNorm on queries and keys (`qk_norm`), query/key/value biases (`qkv_bias`),
shared input and output embeddings (`tied_embeddings`), the norms' epsilon, and RoPE frequency scaling
(rope.py). With the defaults this is AFM: qk-norm, no bias anywhere, tied embeddings, eps 1e-5.
Parallel degrees are not chosen here: megatron's tensor-parallel layers read them from `parallel_state`,
which `training.parallel.setup` configured.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .shapes import ModelShape


def afm_layer_spec(kernels: str = "local", *, qk_norm: bool = True):
    """The layer spec: megatron-core's own modules ("local") or Transformer Engine's fused ones, with or
    without qk-norm; RMSNorm and SwiGLU come from the TransformerConfig. TE is optional (GPU images carry it)."""
    from megatron.core.models.gpt import gpt_layer_specs

    if kernels == "transformer_engine":
        try:
            import transformer_engine  # noqa: F401
        except ImportError:
            from manifests.errors import ConfigError

            raise ConfigError("parallel.kernels=transformer_engine needs the transformer-engine package: "
                              "pip install -r requirements/gpu/train.txt on a GPU machine; use kernels: local "
                              "otherwise") from None
        return gpt_layer_specs.get_gpt_layer_with_transformer_engine_spec(qk_layernorm=qk_norm)
    return gpt_layer_specs.get_gpt_layer_local_spec(qk_layernorm=qk_norm, normalization="RMSNorm")


def transformer_config(shape: ModelShape, *, init_std: float = 0.02, use_cpu_init: bool | None = None,
                       recompute: str = "none", bf16: bool = False, deterministic: bool = False):
    """`recompute`: none | selective (megatron recomputes core attention in backward) | full (every layer
    recomputed from its input, one layer per checkpoint). `bf16`: megatron's native bf16 path (the model is
    wrapped in Float16Module by the GPU trainer; params_dtype/pipeline dtype set here)."""
    from megatron.core import parallel_state
    from megatron.core.transformer import TransformerConfig

    if use_cpu_init is None:
        use_cpu_init = not torch.cuda.is_available()
    return TransformerConfig(
        num_layers=shape.num_layers,
        hidden_size=shape.hidden_size,
        num_attention_heads=shape.num_attention_heads,
        num_query_groups=shape.num_query_groups,
        kv_channels=shape.head_dim,
        ffn_hidden_size=shape.ffn_hidden_size,
        normalization="RMSNorm",
        layernorm_epsilon=shape.norm_eps,  # every RMSNorm, the query/key norms included
        qk_layernorm=shape.qk_norm,
        gated_linear_unit=True,  # SwiGLU: fc1 emits [gate; up], silu(gate) * up
        activation_func=F.silu,
        add_bias_linear=False,
        add_qkv_bias=shape.qkv_bias,  # linear_qkv only (Qwen2); linear_proj and the MLP stay bias-free
        hidden_dropout=0.0,
        attention_dropout=0.0,
        init_method_std=init_std,
        tensor_model_parallel_size=parallel_state.get_tensor_model_parallel_world_size(),
        # fused kernels exist only on GPU; the unfused paths compute the same thing
        bias_activation_fusion=False,
        bias_dropout_fusion=False,
        masked_softmax_fusion=False,
        persist_layer_norm=False,
        apply_rope_fusion=False,
        use_cpu_initialization=use_cpu_init,
        recompute_granularity=None if recompute == "none" else recompute,
        recompute_method="uniform" if recompute == "full" else None,
        recompute_num_layers=1 if recompute == "full" else None,
        bf16=bf16,
        deterministic_mode=deterministic,
        params_dtype=torch.bfloat16 if bf16 else torch.float32,
        pipeline_dtype=torch.bfloat16 if bf16 else torch.float32,
    )


def build_model(shape: ModelShape, *, seq_length: int, rotary_base: float = 500_000, init_std: float = 0.02,
                parallel_output: bool = True, kernels: str = "local", recompute: str = "none", bf16: bool = False,
                deterministic: bool = False, layer_spec=None):
    """A GPTModel on the current device. forward(tokens [B,S], position_ids [B,S], None) gives logits
    [B,S,V/tp] (this rank's vocabulary shard; `parallel_output=False` gathers the full [B,S,V]).
    `layer_spec`: another spec for the same parameters (training/model/sdpa.py's inference attention)."""
    from megatron.core.models.gpt import GPTModel

    from ..parallel import device
    from .rope import rope_inv_freq

    model = GPTModel(
        config=transformer_config(shape, init_std=init_std, recompute=recompute, bf16=bf16,
                                  deterministic=deterministic),
        transformer_layer_spec=layer_spec or afm_layer_spec(kernels, qk_norm=shape.qk_norm),
        vocab_size=shape.vocab_size,
        max_sequence_length=seq_length,
        share_embeddings_and_output_weights=shape.tied_embeddings,
        position_embedding_type="rope",
        rotary_base=rotary_base,
        parallel_output=parallel_output,
    )
    # RoPE frequencies computed once here for every scaling type (megatron's own llama3 option fixes the
    # factors other than `factor`); a plain attribute, not a parameter, so checkpoints do not change
    model.rotary_pos_emb.inv_freq = rope_inv_freq(shape, rotary_base)
    return model.to(device())


def count_parameters(model: torch.nn.Module) -> dict[str, int]:
    total = sum(p.numel() for p in model.parameters())
    embedding = sum(p.numel() for n, p in model.named_parameters()
                    if "word_embeddings" in n or n.startswith("output_layer."))
    return {"total": total, "embedding": embedding, "non_embedding": total - embedding}


def train_top_layers(model, n: int) -> None:
    """Freeze everything but the last `n` transformer layers, the final norm and an untied output layer.
    Autograd then stops at the lowest trainable layer: the backward pass costs ~n/num_layers of a full one."""
    for p in model.parameters():
        p.requires_grad_(False)
    keep = [*model.decoder.layers[-n:], model.decoder.final_layernorm]
    if not model.share_embeddings_and_output_weights and getattr(model, "output_layer", None) is not None:
        keep.append(model.output_layer)
    for module in keep:
        for p in module.parameters():
            p.requires_grad_(True)
