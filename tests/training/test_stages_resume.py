"""Three pretraining stages from mixture manifests, checkpoint manifests, resume == uninterrupted."""

from __future__ import annotations

import json

import pytest

from manifests.errors import ConfigError
from training.checkpoint import open_checkpoint
from training.stages import run_stages
from training.trainer import train

from .helpers import quiet, tiny_cfg


@pytest.mark.slow
def test_three_stages_from_mixtures_with_falling_loss(byte_root, tmp_path):
    configs = [
        tiny_cfg(byte_root, tmp_path / "core", name="core", mixture="tiny-core", steps=60),
        tiny_cfg(byte_root, tmp_path / "continued", name="continued", mixture="tiny-continued", stage="continued",
                 steps=15, batch=8, lr=0.01),
        tiny_cfg(byte_root, tmp_path / "context", name="context", mixture="tiny-context",
                 stage="context-lengthening", steps=15, batch=4, lr=0.01, rotary_base=6_315_089),
    ]
    core, continued, context = run_stages(configs, log=quiet)
    first, last = sum(core.losses[:5]) / 5, sum(core.losses[-5:]) / 5
    assert last < first - 1.5, (first, last)  # 5.5 -> ~3.2 nats per byte
    assert core.eval_loss < 3.6
    for stage in (continued, context):
        start, end = stage.eval_history[0][1], stage.eval_history[-1][1]
        assert end < start, stage.eval_history  # held-out loss falls within the stage
    m = open_checkpoint(context.checkpoint).manifest
    assert m["stage"] == "context-lengthening" and m["rotary_base"] == 6_315_089
    assert m["data"]["source_id"].startswith("tiny-context@") and m["data"]["seq_length"] == 256
    assert m["init_from"] == str(continued.checkpoint)
    assert m["tokens_seen"] == 15 * 4 * 256 and m["data_position"]["samples_consumed"] == 60


def test_resume_reproduces_the_uninterrupted_run_exactly(byte_root, tmp_path):
    full = train(tiny_cfg(byte_root, tmp_path / "full", steps=12, batch=8), log=quiet)
    cfg = tiny_cfg(byte_root, tmp_path / "split", steps=12, batch=8)
    first = train(cfg, stop_after=6, log=quiet)
    assert first.checkpoint.name == "step-0000006"
    second = train(cfg, resume="auto", log=quiet)
    # exact equality, not a tolerance: same samples, same RNG, same optimizer state, deterministic CPU kernels
    assert first.losses + second.losses == full.losses
    assert second.eval_loss == full.eval_loss
    manifest = json.loads((second.checkpoint / "checkpoint.json").read_text())
    assert manifest["step"] == 12 and manifest["data_position"]["samples_consumed"] == 96
    assert manifest["tokens_seen"] == 12 * 8 * 64


def test_resume_refuses_other_data(byte_root, tmp_path):
    train(tiny_cfg(byte_root, tmp_path / "a", steps=4, batch=8), log=quiet)
    other = tiny_cfg(byte_root, tmp_path / "a", steps=5, batch=8)
    with pytest.raises(ConfigError, match="another step count"):
        train(other, resume="auto", log=quiet)


def test_config_errors_say_the_fix(byte_root, tmp_path):
    with pytest.raises(ConfigError, match="multiple of micro_batch"):
        tiny_cfg(byte_root, tmp_path, batch=8, micro_batch=3)
    with pytest.raises(ConfigError, match="unknown model shape"):
        tiny_cfg(byte_root, tmp_path, shape="huge")
    with pytest.raises(ConfigError, match="differs from the mixture"):
        train(tiny_cfg(byte_root, tmp_path, seq_length=32), log=quiet)
