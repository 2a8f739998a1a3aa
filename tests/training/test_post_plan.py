"""`train plan` on post-training configs: rows per item, the explicit mask, LoRA-only state, throughput."""

from __future__ import annotations

import json

import pytest

from training.memory import GiB, activation_bytes
from training.post_config import load_config
from training.post_plan import lora_parameter_count, plan_post

from .test_sft import REPO

POST = REPO / "configs" / "train" / "post"


def test_pairs_take_two_rows_and_the_local_mask_is_counted():
    sft = load_config(POST / "tiny-sft.yaml")
    rm = load_config(POST / "tiny-rm.yaml")
    p_sft = plan_post(sft, gpus=1, gpu_bytes=80 * GiB)
    p_rm = plan_post(rm, gpus=1, gpu_bytes=80 * GiB)
    assert p_sft.memory.micro_batch == sft.micro_batch and p_rm.memory.micro_batch == 2 * rm.micro_batch
    assert p_rm.memory.activations == activation_bytes(rm.model, micro_batch=2 * rm.micro_batch,
                                                       seq_length=rm.seq_length)
    assert p_sft.mask_bytes == sft.micro_batch * sft.seq_length ** 2  # bool [b, 1, s, s]
    assert p_rm.mask_bytes == 2 * rm.micro_batch * rm.seq_length ** 2
    assert p_rm.total == p_rm.memory.total + p_rm.mask_bytes
    # throughput by hand: tokens per step x (6N + 12 L h s) over peak x MFU
    m = rm.model
    n = m.parameter_count()["non_embedding"] + m.vocab_size * m.hidden_size
    flops = 6 * n + 12 * m.num_layers * m.num_attention_heads * m.head_dim * rm.seq_length
    tokens = rm.global_batch * 2 * rm.seq_length
    assert p_rm.step_seconds == pytest.approx(flops * tokens / (989e12 * 0.4))


def test_lora_count_equals_a_real_adapter_and_only_it_has_state(tmp_path):
    from training import parallel
    from training.adapters.lora import LoraConfig, new_adapter
    from training.model import build_model, get_shape

    parallel.setup(parallel.ParallelConfig())
    shape = get_shape("tiny", vocab_size=256)
    adapter = new_adapter(build_model(shape, seq_length=32), LoraConfig(rank=8))
    assert lora_parameter_count(shape, 8) == sum(p.numel() for p in adapter.parameters())
    (tmp_path / "adapter.json").write_text(json.dumps({"rank": 8}))
    cfg = load_config(POST / "tiny-sft.yaml", adapter_init=str(tmp_path))
    plan = plan_post(cfg, gpus=1, gpu_bytes=80 * GiB)
    assert plan.adapter_params == lora_parameter_count(shape, 8)
    assert plan.memory.grads == 4 * plan.adapter_params and plan.memory.optimizer == 8 * plan.adapter_params


def test_cli_plans_the_afm_post_configs():
    from manifests.main import main

    for method in ("sft", "rm", "dpo"):
        assert main(["train", "plan", str(POST / f"afm-on-device-{method}.yaml"), "--gpus", "8"]) == 0
    # a micro-batch that cannot fit is reported as such (exit 1)
    assert main(["train", "plan", str(POST / "afm-on-device-rm.yaml"), "--gpus", "8", "--micro-batch", "64"]) == 1
