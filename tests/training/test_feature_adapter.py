"""`train sft --adapter-init RECOVERY`: a task adapter trained on SFT conversations, starting from the
accuracy-recovery adapter, on the frozen palettized base (AFM report 5.2)."""

from __future__ import annotations

import json

import pytest
import torch

from training import parallel

from .helpers import quiet, tiny_cfg
from .test_sft import REPO

KTO = str(REPO / "data/samples/preference/llamafactory/kto_en_demo.json.gz")


@pytest.fixture(scope="module")
def recovery(byte_root, tmp_path_factory):
    """A tiny trained model, palettized to ~3 bpw, with a rank-4 SVD-init recovery adapter."""
    from training.adapters.lora import LoraConfig
    from training.adapters.recovery import RecoveryConfig, train_batches, train_recovery
    from training.adapters.store import base_id, save_adapter
    from training.quantize.palettize import PalettizeConfig, dequantized_state, load_palettized, \
        palettize_checkpoint
    from training.trainer import load_model, train

    work = tmp_path_factory.mktemp("feature")
    ck = train(tiny_cfg(byte_root, work / "run", steps=30), log=quiet).checkpoint
    pal = palettize_checkpoint(ck, work / "pal", PalettizeConfig(bpw=3.0, iters=10), log=quiet)
    parallel.setup(parallel.ParallelConfig())
    model, manifest = load_palettized(pal)
    src, _ = load_model(ck, seq_length=int(manifest["data"]["seq_length"]))
    deq = dequantized_state(pal)
    residual = {k: src.state_dict()[k] - v for k, v in deq.items() if ".linear_" in k}
    batches = train_batches(manifest, n=32, batch=8, cache_dir=work / "cache")
    adapter, host, _ = train_recovery(model, batches, RecoveryConfig(lora=LoraConfig(rank=4, init="svd"), steps=4),
                                      residual=residual, log=None)
    host.detach()
    return pal, save_adapter(work / "recovery", adapter, base=base_id(pal), extra={"steps": 4})


def _sft_cfg(out, adapter, **extra):
    from training.post_config import from_dict

    raw = {"name": "task", "method": "sft", "model": {"shape": "tiny", "vocab_size": 256}, "tokenizer": "bytes",
           "seq_length": 256, "global_batch": 8, "micro_batch": 8, "steps": 20, "seed": 3, "log_every": 0,
           "out_dir": str(out), "adapter_init": str(adapter),
           "data": {"sources": [{"path": KTO, "max_records": 120}], "valid_fraction": 0.1},
           "optim": {"name": "adamw", "peak_lr": 2e-2, "weight_decay": 0.0, "warmup_steps": 2,
                     "final_fraction": 0.1}}
    raw.update(extra)
    return from_dict(raw)


@pytest.mark.slow
def test_sft_from_recovery_adapter_trains_only_lora_on_the_frozen_base(recovery, tmp_path):
    from training.adapters.lora import AdapterHost
    from training.adapters.store import base_id, load_adapter
    from training.packing import collate
    from training.post_loop import forward
    from training.quantize.palettize import dequantized_state, load_palettized
    from training.sft import prepare, train_sft

    pal, rec_dir = recovery
    rec_before = {k: v.clone() for k, v in load_adapter(rec_dir).state_dict().items()}
    cfg = _sft_cfg(tmp_path / "task", rec_dir)
    result = train_sft(cfg, log=quiet)

    # it starts exactly at base + recovery adapter: the held-out loss before training is that model's
    parallel.setup(parallel.ParallelConfig())
    base, _ = load_palettized(pal, seq_length=cfg.seq_length)
    host = AdapterHost(base)
    host.attach(load_adapter(rec_dir))
    data = prepare(cfg)
    batch = collate(data.valid[:8])
    from training.losses import cross_entropies

    with torch.no_grad():
        (ce,) = cross_entropies(forward(base, batch), [batch["labels"]])
    want = float((ce * batch["loss_mask"]).sum() / batch["loss_mask"].sum())
    start = result.evals[0][1]
    assert start["loss_tokens"] == int(batch["loss_mask"].sum())
    assert abs(start["loss"] - want) < 1e-5

    # the SFT objective falls on held-out conversations (measured 3.335 -> 3.324: a rank-4 adapter on a
    # 30-step tiny base moves little in 20 steps; the point is that it moves with the base frozen)
    assert result.evals[-1][1]["loss"] < start["loss"] - 0.005

    # the base is untouched (bit for bit) and only LoRA tensors were saved as trained
    saved = torch.load(result.checkpoint / "model.pt", map_location="cpu", weights_only=True)
    deq = dequantized_state(pal)
    for name, tensor in deq.items():
        assert torch.equal(saved["base." + name], tensor), name
    task_dir = result.adapter
    manifest = json.loads((task_dir / "adapter.json").read_text())
    assert manifest["base"] == base_id(pal) and manifest["rank"] == 4
    assert manifest["initialised_from"] == str(rec_dir.resolve()) and manifest["method"] == "sft"
    task = load_adapter(task_dir, expect_base=base_id(pal)).state_dict()
    assert set(task) == set(rec_before)
    assert any(not torch.equal(task[k], rec_before[k]) for k in task)  # the copy trained
    after = load_adapter(rec_dir).state_dict()
    assert all(torch.equal(after[k], rec_before[k]) for k in rec_before)  # the recovery adapter did not


def test_adapter_init_refuses_other_methods_and_init_from(recovery, tmp_path):
    from manifests.errors import ConfigError

    _, rec_dir = recovery
    with pytest.raises(ConfigError, match="adapter_init is for sft only"):
        _sft_cfg(tmp_path, rec_dir, init_from=str(tmp_path))


def test_adapter_init_refuses_a_changed_base(recovery, tmp_path):
    import shutil

    from manifests.errors import ManifestError
    from training.adapters.feature import base_directory

    pal, rec_dir = recovery
    moved = tmp_path / "recovery"
    shutil.copytree(rec_dir, moved)
    meta = json.loads((moved / "adapter.json").read_text())
    meta["base"] = meta["base"].split("#sha256:")[0] + "#sha256:0000000000000000"
    (moved / "adapter.json").write_text(json.dumps(meta))
    with pytest.raises(ManifestError, match="has changed since the adapter was trained"):
        base_directory(moved)
