"""The whole flow through the CLI: palettize -> recover (adapter) -> export-hf of the dequantized model ->
export-adapter (PEFT) next to it; transformers + peft then give the megatron palettized model's logits with the
adapter attached. And the demo function palettizes its tiny model and writes a recovery adapter."""

from __future__ import annotations

import json

import pytest
import torch

from training import parallel

from .helpers import quiet, tiny_cfg


@pytest.fixture(scope="module")
def trained(byte_root, tmp_path_factory):
    from training.trainer import train

    return train(tiny_cfg(byte_root, tmp_path_factory.mktemp("flow-run"), steps=40), log=quiet).checkpoint


@pytest.mark.slow
def test_cli_flow_palettize_recover_export(trained, tmp_path, c4_docs, capsys):
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    from manifests.main import main
    from training.adapters.lora import AdapterHost
    from training.adapters.store import base_id, load_adapter
    from training.byte_mixture import encode
    from training.quantize.palettize import load_palettized

    pal, ad, hf_dir = tmp_path / "pal", tmp_path / "recovery", tmp_path / "hf"
    assert main(["quantize", "palettize", str(trained), "--bpw", "3.0", "--out", str(pal)]) == 0
    assert main(["quantize", "recover", str(pal), "--rank", "8", "--steps", "6", "--out", str(ad)]) == 0
    manifest = json.loads((ad / "adapter.json").read_text())
    assert manifest["base"] == base_id(pal) and manifest["rank"] == 8 and manifest["init"] == "svd"
    assert len(manifest["train_losses"]) == 6
    assert main(["quantize", "export-hf", str(pal), "--out", str(hf_dir)]) == 0
    assert main(["quantize", "export-adapter", str(ad), "--hf", str(hf_dir)]) == 0
    # the float model's export is another base: the adapter is refused there, naming both
    assert main(["train", "export-hf", str(trained), "--out", str(tmp_path / "float-hf")]) == 0
    assert main(["quantize", "export-adapter", str(ad), "--hf", str(tmp_path / "float-hf")]) == 1
    assert "but " + str(tmp_path / "float-hf") + " holds" in capsys.readouterr().err
    assert not (tmp_path / "float-hf" / "adapters").exists()

    parallel.setup(parallel.ParallelConfig())
    model, _ = load_palettized(pal, parallel_output=False)
    model.eval()
    host = AdapterHost(model)
    host.attach(load_adapter(ad, expect_base=base_id(pal)))
    hf = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
    hf = peft.PeftModel.from_pretrained(hf, str(hf_dir / "adapters" / "recovery")).eval()
    tokens = torch.as_tensor(encode(c4_docs[3]["text"])[:40].astype("int64"))[None]
    with torch.no_grad():
        ours = model(tokens, torch.arange(40)[None], None)
        theirs = hf(input_ids=tokens).logits
    assert float((ours - theirs).abs().max()) <= 1e-4


@pytest.mark.slow
def test_demo_palettizes_and_trains_recovery_adapter(tmp_path):
    from training.quantize.demo import run

    result = run(str(tmp_path), log=quiet)
    assert result["bpw"] <= 3.6
    assert result["adapted"] < result["quantized"]
    adapter = tmp_path / ".runs" / "demo-palettized" / "adapters" / "recovery-r16"
    assert json.loads((adapter / "adapter.json").read_text())["rank"] == 16
    assert (tmp_path / ".runs" / "demo-palettized" / "manifest.json").exists()
    before, after = result["task"]  # the task adapter from the recovery adapter learns the SFT data
    assert after < before
    task = json.loads((tmp_path / ".runs" / "demo-palettized" / "task-sft" / "adapter" / "adapter.json").read_text())
    assert task["rank"] == 16 and task["initialised_from"].endswith("recovery-r16")


@pytest.mark.slow
def test_cli_recover_with_kl_to_the_source_checkpoint(trained, tmp_path, capsys):
    import shutil

    from manifests.main import main
    from training.adapters.store import base_id

    pal, ad = tmp_path / "pal", tmp_path / "kl"
    assert main(["quantize", "palettize", str(trained), "--bpw", "3.0", "--out", str(pal)]) == 0
    assert json.loads((pal / "manifest.json").read_text())["source_base"] == base_id(trained)
    assert main(["quantize", "recover", str(pal), "--rank", "4", "--steps", "6", "--loss", "kl",
                 "--ce-weight", "0.25", "--out", str(ad)]) == 0
    manifest = json.loads((ad / "adapter.json").read_text())
    assert (manifest["loss"], manifest["ce_weight"], manifest["teacher"]) == ("kl", 0.25, base_id(trained))
    assert len(manifest["train_losses"]) == 6 and manifest["train_losses"][-1] < manifest["train_losses"][0]
    # another checkpoint (the same one with one weight changed) as the teacher: refused, naming both
    other = tmp_path / "other"
    shutil.copytree(trained, other)
    state = torch.load(other / "model.pt", weights_only=False)
    key = next(k for k, v in state.items() if isinstance(v, torch.Tensor) and v.is_floating_point())
    state[key] = state[key] + 1
    torch.save(state, other / "model.pt")
    capsys.readouterr()
    assert main(["quantize", "recover", str(pal), "--loss", "kl", "--teacher", str(other), "--steps", "1",
                 "--out", str(tmp_path / "refused")]) == 1
    err = capsys.readouterr().err
    assert "holds other weights" in err and base_id(trained).rsplit("#", 1)[-1] in err
    assert not (tmp_path / "refused").exists()
