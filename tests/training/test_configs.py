"""configs/train/*.yaml load, validate, and carry the report's values."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.config import load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_config_validates(path):
    cfg = load_config(path)
    assert cfg.data.mixture  # every stage reads a mixture manifest


def test_full_scale_configs_have_the_report_values():
    core = load_config(CONFIGS / "afm-on-device-core.yaml")
    assert (core.optim.name, core.optim.peak_lr, core.optim.weight_decay, core.optim.warmup_steps,
            core.optim.final_fraction, core.optim.beta1, core.optim.beta2, core.optim.eps, core.optim.grad_clip) == \
        ("afm_rmsprop", 0.01, 3.16e-4, 5000, 0.005, 0.95, 0.95, 1e-30, 1.0)
    assert core.distill.teacher_weight == 0.9 and core.rotary_base == 500_000
    continued = load_config(CONFIGS / "afm-on-device-continued.yaml")
    assert (continued.optim.peak_lr, continued.optim.warmup_steps, continued.optim.final_fraction,
            continued.optim.weight_decay) == (3e-4, 1000, 0.001, 1e-5)
    context = load_config(CONFIGS / "afm-on-device-context.yaml")
    assert context.stage == "context-lengthening" and context.rotary_base == 6_315_089
    assert context.parallel.precision == "bf16" and context.parallel.tensor_parallel == 2


def test_transformer_engine_configs_have_it_in_the_gpu_requirements():
    import tomllib

    root = CONFIGS.parents[1]
    gpu_reqs = (root / "requirements/gpu/train.txt").read_text()
    # the gpu extra is read from requirements files (pyproject's [tool.setuptools.dynamic])
    files = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["dynamic"][
        "optional-dependencies"]["gpu"]["file"]
    extra = [line.strip() for f in files for line in (root / f).read_text().splitlines()]
    te_configs = [p.name for p in CONFIGS.glob("*.yaml") if load_config(p).parallel.kernels == "transformer_engine"]
    assert te_configs  # the full-size configs
    assert any(line.startswith("transformer-engine[pytorch]") for line in gpu_reqs.splitlines())
    assert any(dep.startswith("transformer-engine[pytorch]") for dep in extra)
    for p in CONFIGS.glob("afm-*.yaml"):  # every full-size training config: bf16, sharded optimizer, recompute
        if p.stem.endswith("-prune"):  # mask learning: a frozen model, no optimizer state to shard
            continue
        par = load_config(p).parallel
        assert (par.precision, par.distributed_optimizer) == ("bf16", True) and par.recompute != "none", p.name
