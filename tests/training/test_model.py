"""The AFM architecture as megatron-core builds it: shapes, parameter counts, tied embeddings, no biases."""

from __future__ import annotations

import pytest
import torch

from training import parallel
from training.model import build_model, count_parameters, get_shape
from training.model.shapes import SHAPES


@pytest.fixture(scope="module")
def tiny_model():
    parallel.setup(parallel.ParallelConfig(), seed=3)
    return build_model(get_shape("tiny"), seq_length=32, rotary_base=500_000)


def test_tiny_model_has_the_report_architecture(tiny_model):
    names = dict(tiny_model.named_parameters())
    assert not [n for n in names if "bias" in n]  # no biases anywhere
    shape = get_shape("tiny")
    layer = tiny_model.decoder.layers[0]
    # grouped-query attention: one fused projection for 4 query heads + 2 key + 2 value heads of dim 16
    q, kv, hd = shape.num_attention_heads, shape.num_query_groups, shape.head_dim
    assert layer.self_attention.linear_qkv.weight.shape == ((q + 2 * kv) * hd, shape.hidden_size)
    assert type(layer.input_layernorm).__name__ == "RMSNorm"  # pre-norm RMSNorm
    assert type(layer.self_attention.q_layernorm).__name__ == "RMSNorm"  # query/key norm
    assert layer.mlp.linear_fc1.weight.shape == (2 * shape.ffn_hidden_size, shape.hidden_size)  # SwiGLU gate+up
    assert tiny_model.share_embeddings_and_output_weights
    assert "output_layer.weight" not in names  # the output layer reuses the input embedding
    inv_freq = tiny_model.rotary_pos_emb.inv_freq
    assert float(inv_freq[1]) == pytest.approx(500_000 ** (-2 / hd))  # RoPE base 500k


def test_analytic_parameter_count_matches_megatron(tiny_model):
    assert count_parameters(tiny_model)["total"] == get_shape("tiny").parameter_count()["total"]


def test_forward_gives_logits_and_backward_runs(tiny_model):
    tokens = torch.randint(0, 512, (2, 32))
    logits = tiny_model(tokens, torch.arange(32).expand(2, 32), None)
    assert logits.shape == (2, 32, 512)
    logits.float().logsumexp(-1).mean().backward()
    assert tiny_model.embedding.word_embeddings.weight.grad is not None
    tiny_model.zero_grad(set_to_none=True)


def test_named_shapes_match_the_report():
    dev = SHAPES["afm-on-device"]
    assert (dev.hidden_size, dev.num_layers, dev.num_attention_heads, dev.num_query_groups, dev.head_dim) == \
        (3072, 26, 24, 8, 128)
    counts = dev.parameter_count()
    assert abs(counts["non_embedding"] / 2.58e9 - 1) < 0.02  # report: 2.58B non-embedding parameters
    teacher = SHAPES["afm-teacher-6.4b"]
    assert abs(teacher.parameter_count()["total"] / 6.4e9 - 1) < 0.02
    # pruning maps the teacher onto the on-device shape by FFN width alone
    assert teacher.with_(ffn_hidden_size=dev.ffn_hidden_size) == dev.with_(name=teacher.name)
