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
    with pytest.raises(ConfigError, match="another run .*steps 5 vs 4"):
        train(other, resume="auto", log=quiet)


def test_config_errors_say_the_fix(byte_root, tmp_path):
    with pytest.raises(ConfigError, match="multiple of micro_batch"):
        tiny_cfg(byte_root, tmp_path, batch=8, micro_batch=3)
    with pytest.raises(ConfigError, match="unknown model shape"):
        tiny_cfg(byte_root, tmp_path, shape="huge")
    with pytest.raises(ConfigError, match="differs from the mixture"):
        train(tiny_cfg(byte_root, tmp_path, seq_length=32), log=quiet)


def test_held_out_split_by_documents_or_tokens(byte_root, tmp_path):
    import numpy as np
    import torch

    from training.data import blend_from_mixture, valid_fraction

    blend = blend_from_mixture("tiny-core", root=str(byte_root))
    docs = toks = 0
    for _, prefix in blend.components:  # the .idx header read directly: int32 lengths after the counts
        raw = open(prefix + ".idx", "rb").read()
        n_seq = int(np.frombuffer(raw[18:26], dtype=np.int64)[0])
        n_doc = int(np.frombuffer(raw[26:34], dtype=np.int64)[0])
        docs += n_doc - 1
        toks += int(np.frombuffer(raw[34:34 + 4 * n_seq], dtype=np.int32).sum())
    assert valid_fraction(blend, documents=10) == pytest.approx(10 / docs)
    assert valid_fraction(blend, tokens=20_000) == pytest.approx(20_000 / toks)
    assert valid_fraction(blend) == 0.05
    with pytest.raises(ConfigError, match="not less than the data"):
        valid_fraction(blend, tokens=10 * toks)
    with pytest.raises(ConfigError, match="at most one of"):
        tiny_cfg(byte_root, tmp_path, data={"mixture": "tiny-core", "root": str(byte_root), "valid_documents": 5,
                                             "valid_tokens": 100})
    cfg = tiny_cfg(byte_root, tmp_path / "docs", steps=2, batch=4, parallel={"deterministic": True},
                   data={"mixture": "tiny-core", "root": str(byte_root), "valid_samples": 8, "valid_tokens": 30_000})
    try:
        r = train(cfg, log=quiet)
    finally:
        torch.use_deterministic_algorithms(False)
    m = open_checkpoint(r.checkpoint).manifest
    assert m["deterministic"] is True and m["config"]["data"]["valid_tokens"] == 30_000
    rank = torch.load(r.checkpoint / "optim" / "rank-00000.pt", weights_only=False)
    assert {"rng_cpu", "rng_tracker", "rng_python", "rng_numpy"} <= set(rank)
