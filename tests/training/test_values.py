"""Issue 45, class 4 on the training side: values nobody meant are refused before any work, in one line
naming the key (they used to crash with a TypeError or ZeroDivisionError, or run to nonsense and exit 0).
Each test failed on the code before the issue."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from manifests.errors import ConfigError
from manifests.main import main

from .helpers import quiet, tiny_cfg

REPO = Path(__file__).resolve().parents[2]
TINY_CORE = str(REPO / "configs/train/tiny-core.yaml")
TINY_SFT = str(REPO / "configs/train/post/tiny-sft.yaml")


@pytest.mark.parametrize("gpus,message", [("0", "--gpus must be >= 1"), ("-1", "--gpus must be >= 1"),
                                          ("3", "not a multiple of micro_batch 16 x data-parallel size 3")])
def test_train_plan_refuses_gpu_counts_the_trainer_would_refuse(gpus, message, capsys):
    # before: 0 divided by zero, -1 planned a negative memory that "fit", 3 planned a run the trainer refuses
    assert main(["train", "plan", TINY_CORE, "--gpus", gpus, "--seq-length", "64"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_train_plan_refuses_mfu_zero(capsys):
    assert main(["train", "plan", TINY_SFT, "--gpus", "1", "--mfu", "0"]) == 2
    assert "--mfu must be > 0" in capsys.readouterr().err


def test_set_takes_the_keys_the_flags_also_set(capsys, tmp_path, monkeypatch):
    # before: `--set steps=3` (and out_dir, init_from) reached load_config twice: a TypeError
    assert main(["train", "plan", TINY_CORE, "--gpus", "1", "--seq-length", "64", "--json",
                 "--set", "steps=3", "--set", f"out_dir={tmp_path}"]) == 0
    assert json.loads(capsys.readouterr().out)["gpus"] == 1
    monkeypatch.chdir(REPO)  # tiny-sft.yaml names its data relative to the repository
    assert main(["train", "sft", TINY_SFT, "--audit", "--set", "steps=3", "--set", f"out_dir={tmp_path}",
                 "--set", "init_from=null"]) == 0


@pytest.mark.parametrize("key,value,message", [
    ("global_batch", 0, "global_batch must be >= 1"), ("rotary_base", 0, "rotary_base must be >= 1"),
    ("eval_every", -1, "eval_every must be >= 0"), ("save_every", -1, "save_every must be >= 0")])
def test_run_numbers_are_refused_by_the_config(byte_root, tmp_path, key, value, message):
    with pytest.raises(ConfigError, match=message):  # before: 0 batches, RoPE base 0: exit 0 with nonsense
        tiny_cfg(byte_root, tmp_path, **{key: value})


def test_valid_samples_zero_is_refused(byte_root, tmp_path):
    with pytest.raises(ConfigError, match="data.valid_samples must be >= 1"):
        tiny_cfg(byte_root, tmp_path, data={"mixture": "tiny-core", "root": str(byte_root), "valid_samples": 0})


@pytest.mark.parametrize("key,value", [("peak_lr", float("nan")), ("beta2", 1.0), ("warmup_steps", -1)])
def test_optimizer_numbers(byte_root, tmp_path, key, value):
    optim = {"name": "afm_rmsprop", "peak_lr": 0.03, key: value}
    # NaN is refused by the config loader for every number; the others by the optimizer's own bounds
    with pytest.raises(ConfigError, match=rf"optim\.{key} must be|{key} in config: optim: nan is not a finite number"):
        tiny_cfg(byte_root, tmp_path, optim=optim)


@pytest.mark.parametrize("bpw", [0, -1, float("nan")])
def test_palettize_bpw(bpw):
    from training.quantize.palettize import PalettizeConfig

    with pytest.raises(ConfigError, match="--bpw must be"):  # before: a model at the lowest width, exit 0
        PalettizeConfig(bpw=bpw)


@pytest.mark.parametrize("flag,value,message", [("--steps", "0", "--steps must be >= 1"),
                                                ("--batch", "0", "--batch must be >= 1"),
                                                ("--lr", "-1", "--lr must be > 0"),
                                                ("--loss", "mse", "--loss must be one of ce, kl; got 'mse'"),
                                                ("--kl-temperature", "2", "--kl-temperature and --ce-weight apply"),
                                                ("--ce-weight", "0.5", "--kl-temperature and --ce-weight apply to "
                                                                       "--loss kl only"),
                                                ("--teacher", "x", "--teacher applies to --loss kl only")])
def test_recover_numbers_before_any_work(tmp_path, capsys, flag, value, message):
    # the palettized folder does not exist: the numbers are refused before anything is read
    assert main(["quantize", "recover", str(tmp_path / "none"), flag, value, "--out", str(tmp_path / "a")]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("flag,value,message", [("--kl-temperature", "0", "--kl-temperature must be > 0"),
                                                ("--kl-temperature", "nan", "--kl-temperature must be a finite"),
                                                ("--ce-weight", "-0.1", "--ce-weight must be >= 0"),
                                                ("--ce-weight", "1.5", "--ce-weight must be <= 1")])
def test_recover_kl_numbers_before_any_work(tmp_path, capsys, flag, value, message):
    argv = ["quantize", "recover", str(tmp_path / "none"), "--loss", "kl", flag, value, "--out", str(tmp_path / "a")]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_preference_record_without_rejected_is_a_counted_drop(tmp_path):
    from training.chat import ByteTokenizer
    from training.post_config import from_dict
    from training.prefs import load_pairs

    records = [{"conversations": [{"from": "human", "value": f"question {i}"}],
                "chosen": {"from": "gpt", "value": f"good {i}"}, "rejected": {"from": "gpt", "value": f"bad {i}"}}
               for i in range(6)]
    records.append({"conversations": [{"from": "human", "value": "q"}], "chosen": {"from": "gpt", "value": "x"}})
    (tmp_path / "pairs.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    cfg = from_dict({"name": "rm", "method": "rm", "model": {"shape": "tiny", "vocab_size": 256},
                     "out_dir": str(tmp_path / "o"),
                     "data": {"sources": [{"path": str(tmp_path / "pairs.jsonl"), "format": "llamafactory"}],
                              "valid_fraction": 0.3}})
    train, valid, counters = load_pairs(cfg, ByteTokenizer())  # before: KeyError 'rejected'
    assert len(train) + len(valid) == 6 and counters["malformed_dropped"] == 1
    assert "record 6" in counters["first_malformed"] and "no 'rejected' field" in counters["first_malformed"]


def test_sft_prompts_longer_than_the_sequence_are_one_line(tmp_path):
    from training.post_config import from_dict
    from training.sft import train_sft

    recs = [{"messages": [{"role": "user", "content": "x" * 300}, {"role": "assistant", "content": "ok"}]}
            for _ in range(20)]
    (tmp_path / "long.jsonl").write_text("\n".join(json.dumps(r) for r in recs))
    cfg = from_dict({"name": "s", "method": "sft", "model": {"shape": "tiny", "vocab_size": 256}, "seq_length": 64,
                     "steps": 2, "global_batch": 4, "micro_batch": 4, "out_dir": str(tmp_path / "o"),
                     "data": {"sources": [{"path": str(tmp_path / "long.jsonl")}]}})
    # before: ZeroDivisionError (no pack had a loss token left after the cut)
    with pytest.raises(ConfigError, match="no training conversation keeps a loss token within seq_length 64"):
        train_sft(cfg, log=quiet)
