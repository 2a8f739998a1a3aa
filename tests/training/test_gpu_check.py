"""`make gpu-check` (benchmarks/gpu_check.py) on a machine without a GPU: every step's setup runs (imports of
the GPU-path functions, configs, FLOP and memory arithmetic) and says `skipped: no GPU`; with --dry the
training steps' GPU code runs on the CPU at tiny shapes. So a renamed function or a broken config in a GPU path
fails here, not on the next GPU. The FLOPs reference below is worked out by hand from the shape's sizes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import gpu_check  # noqa: E402

from training.flops import flops_per_token, mfu, peak_tflops  # noqa: E402
from training.model import get_shape  # noqa: E402

STEPS = ["env", "pretrain", "resume", "sft", "post", "rollouts", "eval", "quantize", "semantic"]

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path of gpu-check (a GPU runs it all)")


def _run(tmp_path, *args) -> tuple[int, dict, str]:
    out = tmp_path / "out"
    rc = gpu_check.main(["--out", str(out), "--work", str(tmp_path / "work"), "--isolate", "never", *args])
    return rc, json.loads((out / "gpu_check.json").read_text()), (out / "gpu_check.md").read_text()


def test_flops_per_token_by_hand():
    # afm-on-device, per layer: q 3072x3072, k and v 3072x1024 each, o 3072x3072, gated MLP 3 x 3072x8192;
    # plus the tied output projection 49152x3072. Norm gains (~0.17M) are left out of the hand count.
    per_layer = 3072 * 3072 + 2 * 3072 * 1024 + 3072 * 3072 + 3 * 3072 * 8192
    n = 26 * per_layer + 49152 * 3072
    attention = 12 * 26 * 24 * 128 * 2048
    want = 6 * n + attention  # 18.57 GFLOP per token
    got = flops_per_token(get_shape("afm-on-device"), 2048)
    assert abs(got - want) / want < 1e-4
    forward = flops_per_token(get_shape("afm-on-device"), 2048, training=False)
    assert abs(forward - (2 * n + 4 * 26 * 24 * 128 * 2048)) / forward < 1e-4
    lora = flops_per_token(get_shape("afm-on-device"), 2048, frozen_base=True)
    assert abs(lora - (4 * n + attention)) / lora < 1e-4
    # 45% MFU on an H100 (989 TFLOP/s) is 0.45 * 989e12 / 18.57e9 = 23,965 tokens/s
    assert abs(mfu(get_shape("afm-on-device"), 2048, 23_965, 989.0) - 0.45) < 1e-3
    assert mfu(get_shape("afm-on-device"), 2048, 23_965, None) is None


def test_peak_table(monkeypatch):
    monkeypatch.delenv("CIDERMILL_PEAK_TFLOPS", raising=False)
    assert peak_tflops("NVIDIA H100 80GB HBM3")[0] == 989.0
    assert peak_tflops("NVIDIA H100 PCIe")[0] == 756.0
    assert peak_tflops("NVIDIA H200")[0] == 989.0
    assert peak_tflops("NVIDIA A100-SXM4-80GB")[0] == 312.0
    value, why = peak_tflops("Some Future GPU")
    assert value is None and "CIDERMILL_PEAK_TFLOPS" in why
    monkeypatch.setenv("CIDERMILL_PEAK_TFLOPS", "500")
    assert peak_tflops("Some Future GPU") == (500.0, "$CIDERMILL_PEAK_TFLOPS")


def test_cpu_setup_of_every_step(tmp_path):
    rc, body, table = _run(tmp_path)
    assert rc == 0
    assert [s["name"] for s in body["steps"]] == STEPS
    for s in body["steps"]:
        assert s["status"] == "skipped" and s["reason"] == "no GPU (setup checked)", s
        assert all(c["status"] == "pass" for c in s["checks"]), (s["name"], s["checks"])
    pre = body["steps"][1]["numbers"]
    assert pre["shape"] == "afm-on-device"  # the full on-device shape fits one 80 GiB GPU by the plan
    assert pre["planned_memory_GiB"] <= 80
    assert pre["model_GFLOP_per_token"] == 18.57
    assert pre["tokens_per_s_at_45pct_mfu"] == pytest.approx(23_965, abs=5)
    lines = table.splitlines()
    assert lines[2] == "| step | result | s | tokens/s/GPU | MFU | memory GiB plan / measured | numbers | detail |"
    assert len(lines) == 4 + len(STEPS)
    assert lines[5].startswith("| pretrain | skipped |")


def test_a_renamed_gpu_function_fails_the_check(tmp_path, monkeypatch):
    import training.sft

    monkeypatch.delattr(training.sft, "train_sft")
    rc, body, _ = _run(tmp_path, "--steps", "sft")
    assert rc == 1
    (step,) = body["steps"]
    assert step["status"] == "fail" and "train_sft" in step["reason"], step


@pytest.mark.slow
def test_cpu_dry_run(tmp_path):
    """The GPU work of the training steps at tiny shapes on the CPU (about a minute of CPU, minutes of wall
    time on a loaded machine)."""
    rc, body, table = _run(tmp_path, "--dry")
    assert rc == 0, table
    status = {s["name"]: s["status"] for s in body["steps"]}
    assert status == {"env": "skipped", "pretrain": "pass", "resume": "pass", "sft": "pass", "post": "pass",
                      "rollouts": "pass", "eval": "pass", "quantize": "skipped", "semantic": "pass"}
    steps = {s["name"]: s for s in body["steps"]}
    assert steps["resume"]["numbers"]["bit_exact"] is True  # the resumed process repeats the losses exactly
    assert steps["sft"]["numbers"]["packed_vs_unpacked_rel_diff"] <= 1e-4
    assert steps["pretrain"]["numbers"]["tokens_per_s_per_gpu"] > 0
    assert steps["pretrain"]["numbers"]["mfu"] is None  # no peak for a CPU
    assert steps["eval"]["checks"][2]["name"].startswith("megatron backend = HF backend")
    assert steps["eval"]["checks"][2]["status"] == "pass"
    assert "CPU dry run at tiny shapes" in table.splitlines()[0]
    assert steps["semantic"]["numbers"]["max_score_diff_gpu_cpu"] == 0  # the CPU against itself: wiring only
