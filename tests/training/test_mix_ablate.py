"""`cidermill mix ablate` with the real proxy: tiny megatron models trained per variant and seed in a process
pool, held-out loss per component, a versioned result (manifest, table, PNG with error bars) that resumes;
and `train pretrain --mixture` overriding a config's mixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from manifests.main import main as cidermill


@pytest.mark.slow  # six short training runs, each a fresh interpreter, two at a time
def test_mix_ablate_trains_real_proxies_and_resumes(byte_root, capsys):
    argv = ["mix", "--root", str(byte_root), "ablate", "tiny-core", "--delta", "0.5", "--components", "web-long",
            "--seeds", "1,2", "--proxy-tokens", "4096", "--workers", "2"]
    assert cidermill(argv) == 0
    out = capsys.readouterr().out
    manifest_path = Path(out.split("manifest ")[-1].strip())
    result_dir = manifest_path.parent
    assert result_dir.parent == Path(byte_root) / ".ablations" / "tiny-core"  # versioned by its settings
    m = json.loads(manifest_path.read_text())
    assert m["schema_version"] == 1 and m["settings"]["proxy"] == "train (tiny megatron)"
    assert m["settings"]["seeds"] == [1, 2] and len(m["runs"]) == 6 and not any(r["resumed"] for r in m["runs"])
    for run in m["runs"]:  # every run really trained: 4096 tokens = 8 steps of 8 x 64 on its own variant
        proxy = json.loads((result_dir / run["variant"] / f"seed-{run['seed']}" / "proxy.json").read_text())
        assert proxy["steps"] == 8 and proxy["tokens"] == 4096 and proxy["seed"] == run["seed"]
        assert set(run["scores"]) == {"loss/web-short", "loss/web-long", "loss/mean"}
        assert all(2.0 < v < 6.0 for v in run["scores"].values())  # nats per byte of a barely trained model
    by = {r["variant"]: r for r in m["rows"]}
    base = by["tiny-core"]
    assert base["gain:loss/mean"] == 0.0 and base["gain_sd:loss/mean"] == 0.0 and base["seeds"] == 2
    plus = by["tiny-core.abl-web-long-plus"]
    seeds = {r["seed"]: r["scores"] for r in m["runs"] if r["variant"] == plus["variant"]}
    base_seeds = {r["seed"]: r["scores"] for r in m["runs"] if r["variant"] == "tiny-core"}
    gains = [base_seeds[s]["loss/web-long"] - seeds[s]["loss/web-long"] for s in (1, 2)]  # lower is better
    assert plus["gain:loss/web-long"] == pytest.approx(sum(gains) / 2)
    assert plus["gain_sd:loss/web-long"] == pytest.approx(abs(gains[0] - gains[1]) / 2 ** 0.5)
    w = plus["base_weight"] * 1.5
    assert plus["weight"] == pytest.approx(w / (w + 1 - plus["base_weight"]))  # w·1.5, renormalised
    assert (result_dir / "ablation.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (result_dir / "ablation.md").read_text().count("\n") == 2 + 3
    # interrupted: drop one run's scores; the rerun trains only that one
    (result_dir / "tiny-core.abl-web-long-minus" / "seed-2" / "scores.json").unlink()
    assert cidermill(argv) == 0
    again = json.loads(manifest_path.read_text())
    assert sum(not r["resumed"] for r in again["runs"]) == 1


def test_pretrain_mixture_override(byte_root, tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text(json.dumps({
        "name": "ovr", "model": {"shape": "tiny", "vocab_size": 256},
        "data": {"mixture": "no-such-mixture", "valid_samples": 8},
        "optim": {"peak_lr": 0.03, "warmup_steps": 1, "mup_base_width": 64},
        "global_batch": 4, "micro_batch": 4, "log_every": 0}))
    out_dir = tmp_path / "out"
    assert cidermill(["train", "pretrain", str(config), "--steps", "2", "--out-dir", str(out_dir),
                      "--root", str(byte_root), "--mixture", "tiny-continued"]) == 0
    assert cidermill(["train", "show", str(out_dir)]) == 0
    assert '"source_id": "tiny-continued@' in capsys.readouterr().out
