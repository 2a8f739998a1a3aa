"""The one config library (manifests/config.py): pipelines, mixtures and training configs share it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from manifests.config import Count, Size, build_config, require
from manifests.overrides import apply_overrides, parse_assignment
from manifests.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, kw_only=True)
class Inner:
    min_words: int = 1

    def __post_init__(self):
        require(self.min_words >= 0, f"min_words must be >= 0; got {self.min_words}")


@dataclass(frozen=True, kw_only=True)
class Outer:
    tokens: Count
    shard: Size = 1024
    blend: tuple[tuple[float, str], ...] = ()
    inner: Inner = Inner()


def test_unknown_key_says_did_you_mean_and_the_owner():
    with pytest.raises(ConfigError, match=r"unknown key 'tokns' in run.yaml; did you mean 'tokens'\?"):
        build_config(Outer, {"tokns": 3}, where="run.yaml")
    with pytest.raises(ConfigError, match=r"unknown key 'min_wrds' in inner in run.yaml; did you mean 'min_words'"):
        build_config(Outer, {"tokens": 1, "inner": {"min_wrds": 2}}, where="run.yaml")


def test_types_counts_sizes_and_fixed_tuples():
    c = build_config(Outer, {"tokens": "6.3T", "shard": "64MiB", "blend": [[1, "a"], [0.5, "b"]]}, where="x")
    assert c.tokens == 6_300_000_000_000 and c.shard == 64 * 1024**2
    assert c.blend == ((1.0, "a"), (0.5, "b"))
    with pytest.raises(ConfigError, match=r"blend\[0\]\[1\] in x: expected a string, got 3"):
        build_config(Outer, {"tokens": 1, "blend": [[1, 3]]}, where="x")
    with pytest.raises(ConfigError, match="not a count"):
        build_config(Outer, {"tokens": "lots"}, where="x")
    with pytest.raises(ConfigError, match="min_words must be >= 0; got -1 in inner in x"):
        build_config(Outer, {"tokens": 1, "inner": {"min_words": -1}}, where="x")


def test_overrides_walk_mappings_and_stage_lists_without_touching_the_input():
    data = {"executor": {"workers": 2}, "stages": [{"text_length_v1": {"min_words": 5}}, "normalize_text_v1"]}
    out = apply_overrides(data, ["executor.workers=4", "stages.text_length_v1.min_words=30",
                                 "stages.normalize_text_v1.form=NFKC", "output.root=/tmp/x"], where="p.yaml")
    assert out == {"executor": {"workers": 4}, "output": {"root": "/tmp/x"},
                   "stages": [{"text_length_v1": {"min_words": 30}}, {"normalize_text_v1": {"form": "NFKC"}}]}
    assert data["executor"]["workers"] == 2 and data["stages"][1] == "normalize_text_v1"
    with pytest.raises(ConfigError, match="names no item in the list in p.yaml; did you mean 'text_length_v1'"):
        apply_overrides(data, ["stages.text_lenght_v1.min_words=3"], where="p.yaml")
    with pytest.raises(ConfigError, match="write KEY.PATH=VALUE"):
        parse_assignment("executor.workers")
    assert parse_assignment("a.b=[1, 2]") == ("a.b", [1, 2]) and parse_assignment("a=null") == ("a", None)


def test_set_on_the_command_line_is_validated_like_the_yaml(capsys, monkeypatch):
    monkeypatch.chdir(REPO)  # the demo configs name their inputs relative to the repository root
    from manifests.main import main

    pipeline = "configs/demo/10-c4-clean.yaml"
    assert main(["corpus", "run", pipeline, "--dry-run", "--set", "stages.text_length_v1.min_words=30",
                 "--set", "executor.workers=3"]) == 0
    out = capsys.readouterr().out
    assert '"min_words":30' in out and "3 workers" in out
    assert main(["corpus", "run", pipeline, "--dry-run", "--set", "executor.workers=many"]) == 2
    assert "workers in configs/demo/10-c4-clean.yaml executor: expected an integer, got 'many'" in capsys.readouterr().err
    assert main(["corpus", "run", pipeline, "--dry-run", "--set", "stages.text_length_v1.min_wrds=30"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'min_words'" in err and "10-c4-clean.yaml stages[" in err


def test_training_and_mixture_configs_use_the_same_checks(monkeypatch):
    monkeypatch.chdir(REPO)
    from manifests.mixture import KNOWN_STAGES, PRETRAIN_STAGES, MixtureSpec
    from training.config import STAGES, load_config

    assert STAGES == PRETRAIN_STAGES and set(PRETRAIN_STAGES) < set(KNOWN_STAGES)
    with pytest.raises(ConfigError, match="global_batch in configs/train/tiny-core.yaml: expected an integer"):
        load_config("configs/train/tiny-core.yaml", global_batch="eight")
    with pytest.raises(ConfigError, match="unknown key 'peak_lrr'.*did you mean 'peak_lr'"):
        load_config("configs/train/tiny-core.yaml", **{"optim.peak_lrr": 1e-3})
    assert load_config("configs/train/tiny-core.yaml", **{"optim.peak_lr": 1e-3}).optim.peak_lr == 1e-3
    spec = {"name": "m", "stage": "core", "tokenizer": "t", "seq_length": 8, "token_budget": "1k",
            "components": [{"name": "a", "dataset": "x", "wieght": 1}]}
    with pytest.raises(ConfigError, match=r"unknown key 'wieght' in components\[0\] in mix.yaml; did you mean 'weight'"):
        MixtureSpec.from_dict(spec, where="mix.yaml")


def test_yaml11_exponent_floats_are_numbers():
    """PyYAML reads `3e-4` (no dot) as a string; a float field takes it as the number it is."""
    import yaml

    @dataclass(frozen=True, kw_only=True)
    class Optim:
        peak_lr: float = 0.1
        eps: float = 1e-8

    raw = yaml.safe_load("peak_lr: 3e-4\neps: 1E-30\n")
    assert raw == {"peak_lr": "3e-4", "eps": "1E-30"}  # the YAML 1.1 quirk itself
    assert build_config(Optim, raw, where="x.yaml") == Optim(peak_lr=3e-4, eps=1e-30)
    with pytest.raises(ConfigError, match=r"peak_lr in x.yaml: expected a number, got '3e-4x'"):
        build_config(Optim, {"peak_lr": "3e-4x"}, where="x.yaml")


def test_a_missing_evaluation_folder_is_one_line_naming_it(tmp_path, capsys, monkeypatch):
    from manifests.main import main

    monkeypatch.setenv("CIDERMILL_SHARED_DATA", str(tmp_path / "nowhere"))
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "data", "safety"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 'nowhere' / 'safety_real'}: no *.jsonl.gz row files")
    assert "Traceback" not in err
    with pytest.raises(FileNotFoundError):   # -v keeps the traceback, for a bug
        main(["-v", "eval", "data", "safety"])
