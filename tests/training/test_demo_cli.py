"""The demo step and the `cidermill train` group, end to end on tiny data."""

from __future__ import annotations

import json

import pytest

from manifests.main import main as cidermill


@pytest.mark.slow
def test_demo_falls_back_to_bytes_without_demo_core(tmp_path, capsys):
    from training import demo

    demo.run(str(tmp_path))  # an empty data root: no demo-core, no c4-clean -> the bundled C4 sample
    out = capsys.readouterr().out
    assert "tokenizing the bundled C4 sample as UTF-8 bytes" in out
    first, last = [float(x) for x in out.split("\nloss ")[1].split(" (")[0].split(" -> ")]
    assert last < first - 1.0


def test_cli_pretrain_show_and_shapes(byte_root, tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text(json.dumps({  # JSON is YAML
        "name": "cli", "model": {"shape": "tiny", "vocab_size": 256},
        "data": {"mixture": "tiny-core", "valid_samples": 16},
        "optim": {"peak_lr": 0.03, "warmup_steps": 2, "mup_base_width": 64},
        "global_batch": 8, "micro_batch": 8, "log_every": 5}))
    out_dir = tmp_path / "out"
    assert cidermill(["train", "pretrain", str(config), "--steps", "5", "--out-dir", str(out_dir),
                      "--root", str(byte_root)]) == 0
    assert cidermill(["train", "show", str(out_dir)]) == 0
    assert cidermill(["train", "shapes"]) == 0
    out = capsys.readouterr().out
    assert "[cli] step 5/5" in out
    assert '"step": 5' in out and '"source_id": "tiny-core@' in out
    assert "afm-on-device" in out and "2.77B" in out
