"""Issue 45, classes 1 and 2 on the pretraining trainer (tiny shapes, CPU): checkpoints cannot be lost or
mixed up, and wrong inputs do not train silently. Each test failed on the code before the issue."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
import torch

from manifests.errors import ConfigError, FatalError, ManifestError
from manifests.locks import Lock
from manifests.storage import Location
from training import checkpoint as ckpt
from training.trainer import load_model, train

from .helpers import quiet, tiny_cfg


# ---- class 1: checkpoints lost or mixed up --------------------------------------------------------------
def test_resume_auto_refuses_another_runs_checkpoint(byte_root, tmp_path):
    run = tmp_path / "run"
    train(tiny_cfg(byte_root, run, steps=4, batch=8, lr=0.03), log=quiet)
    other_lr = tiny_cfg(byte_root, run, steps=4, batch=8, lr=0.01)
    # before: "resumed" at the other run's last step and published its model under this config
    with pytest.raises(ConfigError, match=r"another run .*optim.peak_lr 0.01 vs 0.03"):
        train(other_lr, resume="auto", log=quiet)
    with pytest.raises(ConfigError, match="not going to write over them"):  # nor start over on top of it
        train(other_lr, log=quiet)
    # the same run resumes (nothing left to do: it ends at its own last step)
    again = train(tiny_cfg(byte_root, run, steps=4, batch=8, lr=0.03), resume="auto", log=quiet)
    assert again.losses == [] and again.checkpoint.name == "step-0000004"


def test_resume_refuses_another_global_batch(byte_root, tmp_path):
    run = tmp_path / "run"
    train(tiny_cfg(byte_root, run, steps=6, batch=8), stop_after=2, log=quiet)
    # before: resumed, read samples [2*4, ...) of the new batch size while the manifest said 16 were consumed
    with pytest.raises(ConfigError, match=r"global_batch 4 vs 8"):
        train(tiny_cfg(byte_root, run, steps=6, batch=4), resume="auto", log=quiet)


def test_a_save_killed_midway_leaves_the_previous_checkpoint_whole(byte_root, tmp_path, monkeypatch):
    run = tmp_path / "run"
    cfg = tiny_cfg(byte_root, run, steps=3, batch=8)
    first = train(cfg, log=quiet)
    before = (first.checkpoint / "model.pt").read_bytes()
    real_save = torch.save

    def dies_after_weights(obj, path, *a, **k):  # the rerun is killed while it writes the weights
        if str(path).endswith("model.pt"):
            open(path, "wb").close()  # 0 bytes written so far
            raise KeyboardInterrupt("killed")
        return real_save(obj, path, *a, **k)

    monkeypatch.setattr(torch, "save", dies_after_weights)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, log=quiet)
    monkeypatch.setattr(torch, "save", real_save)
    # before: the old checkpoint.json beside a 0-byte model.pt
    info = ckpt.open_checkpoint(run / "step-0000003")
    assert (info.directory / "model.pt").read_bytes() == before and ckpt.verify(info) == []
    model, _ = load_model(run, seq_length=64)
    lines = []
    train(cfg, log=lines.append)  # the next run finishes what the kill left behind
    assert any("removed the unfinished save .step-0000003.partial" in line for line in lines)
    assert not list(run.glob(".step-*"))


def test_a_second_run_into_a_held_folder_stops_at_once(byte_root, tmp_path):
    run = tmp_path / "run"
    holder = Lock(Location.parse(str(run)), "run", what="test holder", wait_s=0)
    holder.acquire()  # another process training into `run` (flock: another open file, same conflict)
    try:
        # before: both runs trained into the folder, their steps interleaved, and both reported success
        with pytest.raises(FatalError, match="another run is writing to"):
            train(tiny_cfg(byte_root, run, steps=2, batch=8), log=quiet)
    finally:
        holder.release()
    assert not list(run.glob("step-*"))


def test_stages_sharing_an_out_dir_are_refused_before_any_work(byte_root, tmp_path):
    from training.stages import run_stages

    configs = [tiny_cfg(byte_root, tmp_path / "same", name="core", steps=2, batch=8),
               tiny_cfg(byte_root, tmp_path / "same", name="continued", mixture="tiny-continued",
                        stage="continued", steps=2, batch=8)]
    # before: the second stage wrote over step-0000002, the checkpoint it had started from
    with pytest.raises(ConfigError, match="share out_dir"):
        run_stages(configs, log=quiet)
    assert not (tmp_path / "same").exists()


# ---- class 2: wrong inputs train silently -----------------------------------------------------------------
def test_corrupted_weights_are_not_loaded(byte_root, tmp_path):
    r = train(tiny_cfg(byte_root, tmp_path / "run", steps=2, batch=8), log=quiet)
    weights = r.checkpoint / "model.pt"
    raw = bytearray(weights.read_bytes())
    raw[len(raw) // 2] ^= 0x5A  # one flipped byte in the middle of the tensors
    weights.write_bytes(bytes(raw))
    with pytest.raises(ManifestError, match="model.pt sha256 .* != manifest"):
        load_model(r.checkpoint, seq_length=64)
    with pytest.raises(ManifestError, match="model.pt sha256"):
        train(tiny_cfg(byte_root, tmp_path / "next", steps=2, batch=8, init_from=str(r.checkpoint)), log=quiet)


def test_nan_weights_do_not_train(byte_root, tmp_path):
    from training import parallel
    from training.model import build_model, get_shape

    parallel.setup(parallel.ParallelConfig())
    shape = get_shape("tiny", vocab_size=256)
    model = build_model(shape, seq_length=64, rotary_base=500_000)
    with torch.no_grad():
        next(model.parameters()).fill_(float("nan"))
    ckpt.save(tmp_path / "nan", model=model, manifest={"run": "nan", "step": 0, "model_shape": asdict(shape),
                                                      "rotary_base": 500_000, "data": {"seq_length": 64}})
    # before: every step skipped on the NaN loss, exit 0, and a NaN checkpoint published as the result
    with pytest.raises(ManifestError, match="holds NaN or infinite values"):
        train(tiny_cfg(byte_root, tmp_path / "run", steps=3, batch=8, init_from=str(tmp_path / "nan")), log=quiet)
    assert not list((tmp_path / "run").glob("step-*"))


def test_an_edited_mixture_json_is_refused(tmp_path, c4_docs):
    from training.byte_mixture import publish_tiny_mixtures

    root = tmp_path / "root"
    publish_tiny_mixtures(root, [d["text"] for d in c4_docs])
    (path,) = root.glob("tiny-core/*/mixture.json")
    body = json.loads(path.read_text())
    for c, w in zip(body["components"], (0.2, 0.8)):  # weights re-balanced by hand, still summing to 1
        c["weight"] = w
    path.write_text(json.dumps(body, indent=1))
    # before: trained on 0.2/0.8 under the version id of the 0.5/0.5 mixture (`data verify` saw it)
    with pytest.raises(ConfigError, match="does not match its catalog manifest .*edited after publishing"):
        train(tiny_cfg(root, tmp_path / "run", steps=2, batch=8), log=quiet)


def test_init_from_a_checkpoint_of_another_tokenizer_is_refused(byte_root, tmp_path, c4_docs):
    import io

    spm = pytest.importorskip("sentencepiece")
    from corpus.mix.tokenizer.train import TokenizerTrainConfig
    from training.post_config import from_dict
    from training.sft import train_sft

    from .test_sft import REPO

    base = train(tiny_cfg(byte_root, tmp_path / "bytes", steps=2, batch=8, model={"shape": "tiny",
                                                                                  "vocab_size": 640}), log=quiet)
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter([d["text"] for d in c4_docs[:200]]), model_writer=buf,
                                   **TokenizerTrainConfig(vocab_size=600).spm_options())
    (tmp_path / "bpe.model").write_bytes(buf.getvalue())
    cfg = from_dict({"name": "sft", "method": "sft", "model": {"shape": "tiny", "vocab_size": 640},
                     "tokenizer": str(tmp_path / "bpe.model"), "seq_length": 128, "steps": 2,
                     "global_batch": 4, "micro_batch": 4, "init_from": str(base.checkpoint), "log_every": 0,
                     "out_dir": str(tmp_path / "sft"),
                     "data": {"sources": [{"path": str(REPO / "data/samples/preference/llamafactory/"
                                                           "kto_en_demo.json.gz"), "max_records": 40}]}})
    # before: SFT trained the byte-level model on BPE ids (same shape, so nothing noticed)
    with pytest.raises(ConfigError, match="was trained with tokenizer utf8-bytes .*its ids mean other text"):
        train_sft(cfg, log=quiet)


def test_a_weight_zero_component_is_published_and_left_out_of_training(tmp_path, c4_docs):
    from training.byte_mixture import publish_byte_mixture

    texts = [d["text"] for d in c4_docs]
    root = tmp_path / "root"
    publish_byte_mixture(root, name="zero", stage="core", seq_length=64, token_budget=64 * 16 * 4,
                         components={"kept": (1.0, texts[:150]), "off": (0.0, texts[150:])})
    lines = []
    # before: `mix build` published the mixture and the trainer refused it ("weight ... must be > 0")
    r = train(tiny_cfg(root, tmp_path / "run", mixture="zero", steps=2, batch=8), log=lines.append)
    assert any("weight 0 in zero@" in line and "not trained on" in line for line in lines)
    blend = ckpt.open_checkpoint(r.checkpoint).manifest["data"]["blend"]
    assert [float(w) for w in blend[0::2]] == [1.0, 0.0]  # the manifest keeps the component, at weight 0
