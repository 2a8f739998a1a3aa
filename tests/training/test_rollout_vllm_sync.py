"""The vLLM backend's weight refresh, file handling only (vLLM itself needs CUDA: not importable here).
A real tiny checkpoint is exported with training/export_hf.py; the folder must load in transformers."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
import torch

from training import checkpoint as ckpt
from training import parallel
from training.model import build_model, get_shape
from training.rollout.vllm_backend import WeightSync, checkpoint_id


def _save(directory, seed):
    parallel.setup(parallel.ParallelConfig(), seed=seed)
    shape = get_shape("tiny", vocab_size=256)
    model = build_model(shape, seq_length=64, rotary_base=10_000)
    ckpt.save(directory, model=model, manifest={
        "run": "t", "stage": "post-rl", "step": seed, "model_shape": asdict(shape), "rotary_base": 10_000,
        "kernels": "local", "config": {"tokenizer": "bytes"}, "data": {"seq_length": 64}},
        tokenizer=({"name": "utf8-bytes", "kind": "bytes", "vocab_size": 256, "eod_id": 0}, None))
    return model


def test_publish_versions_skips_unchanged_and_keeps_the_newest(tmp_path):
    a, b = tmp_path / "ckpt-a", tmp_path / "ckpt-b"
    _save(a, 1)
    model_b = _save(b, 2)
    sync = WeightSync(tmp_path / "vllm", keep=2)
    f1, changed1 = sync.publish(a)
    f1_again, changed_again = sync.publish(a)  # same weights: nothing exported
    assert changed1 and not changed_again and f1 == f1_again and sync.exports == 1
    f2, changed2 = sync.publish(b)
    assert changed2 and f2.name.startswith("v0002-") and sync.current()["version"] == 2
    assert json.loads((tmp_path / "vllm" / "current.json").read_text())["folder"] == f2.name
    # a policy update rewrites checkpoint a in place: a new id, a new version; v0001 falls out of `keep`
    id_before = checkpoint_id(a)
    _save(a, 3)
    assert checkpoint_id(a) != id_before
    f3, _ = sync.publish(a)
    assert [p.name[:5] for p in sync.versions()] == ["v0002", "v0003"] and not f1.exists()
    assert not list((tmp_path / "vllm").glob(".*.tmp"))  # no half-written folder left behind
    # the exported folder is a Hugging Face model whose logits equal the megatron checkpoint's
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(f2)).eval()
    tokens = torch.tensor([[72, 105, 32, 116, 104, 101, 114, 101]])
    with torch.no_grad():
        ref = model_b.eval()(tokens, torch.arange(8)[None], None, runtime_gather_output=True)
        got = hf(tokens).logits
    assert torch.allclose(got, ref, atol=1e-4)
    tok = transformers.AutoTokenizer.from_pretrained(str(f3))
    assert tok.encode("Hi", add_special_tokens=False) == [72, 105]


def test_a_failed_export_leaves_the_current_version(tmp_path):
    a = tmp_path / "ckpt-a"
    _save(a, 1)
    good = WeightSync(tmp_path / "vllm")
    f1, _ = good.publish(a)
    _save(a, 4)

    def broken(checkpoint, out):
        (out / "config.json").write_text("{}")
        raise OSError("disk full")

    with pytest.raises(OSError):
        WeightSync(tmp_path / "vllm", export=broken).publish(a)
    assert good.current()["folder"] == f1.name and f1.is_dir()
    assert [p.name for p in good.versions()] == [f1.name]
    assert not list((tmp_path / "vllm").glob(".*.tmp"))


def test_in_memory_refresh_converts_the_live_model_to_the_exported_weights(tmp_path):
    """refresh_from_model's conversion (the vLLM call itself needs a GPU) equals the published file's."""
    from safetensors.torch import load_file

    from training.export_hf import convert_state

    model = _save(tmp_path / "c", 5)
    folder, _ = WeightSync(tmp_path / "vllm").publish(tmp_path / "c")
    live = convert_state({k: v.detach() for k, v in model.state_dict().items() if hasattr(v, "detach")},
                         asdict(get_shape("tiny", vocab_size=256)))
    stored = load_file(str(folder / "model.safetensors"))
    assert set(stored) <= set(live)  # tied embeddings: the file keeps one copy
    assert all(torch.equal(live[k], stored[k]) for k in stored)
