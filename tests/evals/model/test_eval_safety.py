"""Issue 45, class 3 (and the evaluation side of class 4): evaluations and exports use the tokenizer the
checkpoint trained with, work on post-training checkpoints, never overwrite or mix result folders, and say
when two scores were measured on different item counts. Each test failed on the code before the issue."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from manifests.errors import ConfigError
from manifests.main import main
from tests.training.helpers import quiet, tiny_cfg

REPO = Path(__file__).resolve().parents[3]
DEMO_DATA = REPO / "data" / "samples" / "eval_benchmarks" / "benchmarks"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, c4_docs):
    """Two runs with the same step names: another learning rate, so other weights."""
    from training.byte_mixture import publish_tiny_mixtures
    from training.trainer import train

    root = tmp_path_factory.mktemp("safety-root")
    publish_tiny_mixtures(root, [d["text"] for d in c4_docs])
    a = train(tiny_cfg(root, root / "runs" / "a", name="a", steps=2, batch=8, lr=0.03), log=quiet).checkpoint
    b = train(tiny_cfg(root, root / "runs" / "b", name="b", steps=2, batch=8, lr=0.01), log=quiet).checkpoint
    return root, a, b


def test_export_and_eval_use_the_tokenizer_the_checkpoint_recorded(tmp_path, c4_docs):
    import io

    spm = pytest.importorskip("sentencepiece")
    from corpus.mix.tokenizer.train import TokenizerTrainConfig
    from evals.model.backends import MegatronLM
    from manifests import Catalog
    from manifests.mixture import MixtureManifest
    from training.byte_mixture import publish_tiny_mixtures
    from training.export_hf import export_hf
    from training.trainer import train

    root = tmp_path / "root"
    publish_tiny_mixtures(root, [d["text"] for d in c4_docs])
    a = train(tiny_cfg(root, tmp_path / "run", steps=2, batch=8), log=quiet).checkpoint
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter([d["text"] for d in c4_docs[:200]]), model_writer=buf,
                                   **TokenizerTrainConfig(vocab_size=600).spm_options())
    (tmp_path / "bpe.model").write_bytes(buf.getvalue())
    # the mixture is rebuilt under the same name with another tokenizer (a newer version of `tiny-core`)
    m = MixtureManifest.open(root, "tiny-core")
    newer = dataclasses.replace(m, tokenizer={"name": "bpe", "kind": "sentencepiece", "vocab_size": 600,
                                              "eod_id": 2, "model_file": str(tmp_path / "bpe.model"),
                                              "model_sha256": "0" * 64})
    newer.publish(Catalog(str(root)))
    out = export_hf(a, tmp_path / "hf")
    # before: the newest `tiny-core` was looked up, and the export shipped the BPE model with byte-level weights
    assert json.loads((out / "export.json").read_text())["tokenizer"]["kind"] == "bytes"
    assert not (out / "tokenizer.model").exists()
    assert MegatronLM(a).encode("abc") == [97, 98, 99]


def test_sft_checkpoints_can_be_evaluated_and_exported(tmp_path):
    from evals.model.backends import MegatronLM
    from tests.training.test_sft import sft_cfg
    from training.export_hf import export_hf
    from training.sft import train_sft

    ckpt = train_sft(sft_cfg(tmp_path / "sft", steps=2), log=quiet).checkpoint
    # before: "trained on a hand-made blend; its tokenizer is unknown", though the manifest recorded it
    lm = MegatronLM(ckpt)
    [(logp, _)] = lm.loglikelihood([("<|user|>\nHello<|end|>\n<|assistant|>\n", "Hi")])
    assert logp < 0 and lm.describe()["run"] == "t-sft"
    out = export_hf(ckpt, tmp_path / "hf")
    assert json.loads((out / "export.json").read_text())["tokenizer"]["kind"] == "bytes"


def test_default_result_folders_differ_and_are_replaced_whole(two_runs, tmp_path, monkeypatch, capsys):
    _, a, b = two_runs
    assert a.name == b.name == "step-0000002"
    monkeypatch.chdir(tmp_path)
    for ckpt in (a, b):
        assert main(["eval", "model", str(ckpt), "--tasks", "arc_easy,piqa", "--limit", "2",
                     "--data-dir", str(DEMO_DATA)]) == 0
    # before: both went to data/evals/model/step-0000002, the second overwriting the first
    folders = sorted(p.name for p in (tmp_path / "data" / "evals" / "model").iterdir())
    assert len(folders) == 2 and folders[0].startswith("a-step-0000002-") and folders[1].startswith("b-step-0000002-")
    first = tmp_path / "data" / "evals" / "model" / folders[0]
    assert main(["eval", "model", str(a), "--tasks", "arc_easy", "--limit", "2", "--data-dir", str(DEMO_DATA),
                 "--out", str(first)]) == 0  # the same model again, fewer tasks: the folder is replaced whole
    assert sorted(p.name for p in (first / "samples").iterdir()) == ["arc_easy.jsonl"]  # no stale piqa samples
    capsys.readouterr()
    assert main(["eval", "model", str(b), "--tasks", "arc_easy", "--limit", "2", "--data-dir", str(DEMO_DATA),
                 "--out", str(first)]) == 2  # another model into it: refused, one line
    assert "holds the results of another model" in capsys.readouterr().err
    assert json.loads((first / "manifest.json").read_text())["model"]["run"] == "a"


def test_export_into_a_non_empty_folder_is_refused(two_runs, tmp_path):
    from training.export_hf import export_hf

    _, a, b = two_runs
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    # before: the export's files were merged into the folder without a word
    with pytest.raises(ConfigError, match="is not empty .*files that are not an export"):
        export_hf(a, tmp_path / "mine")
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]
    out = export_hf(a, tmp_path / "hf")
    export_hf(a, out)  # the same weights again: replaced
    with pytest.raises(ConfigError, match="an export of other weights"):
        export_hf(b, out)
    assert not list(tmp_path.glob(".*partial"))


def test_compare_notes_different_item_counts():
    from evals.model.runner import compare

    def result(n, acc):
        return {"tasks": {"arc_easy": {"version": "v1", "metrics": {"acc": acc, "n": n}}}}

    # before: 0.6 - 0.5 printed as +0.1 with no note, though 10 and 100 items were scored
    [row] = compare(result(10, 0.5), result(100, 0.6))
    assert row["delta"] == pytest.approx(0.1) and row["note"] == "items differ: 10 vs 100"
    [same] = compare(result(10, 0.5), result(10, 0.6))
    assert same["note"] == ""


# ---- class 4, evaluation options and data ----------------------------------------------------------------
@pytest.mark.parametrize("flags,message", [(["--limit", "0"], "--limit must be >= 1"),
                                           (["--limit", "-1"], "--limit must be >= 1"),
                                           (["--max-length", "0"], "--max-length must be >= 2")])
def test_eval_numbers_are_checked_before_work(two_runs, tmp_path, capsys, flags, message):
    _, a, _ = two_runs
    # before: --limit 0 scored every item, -1 all but the last, and called it a result
    assert main(["eval", "model", str(a), "--tasks", "arc_easy", "--data-dir", str(DEMO_DATA),
                 "--out", str(tmp_path / "r"), *flags]) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "r").exists()


def test_a_max_length_shorter_than_the_generation_is_refused(two_runs, tmp_path, capsys):
    _, a, _ = two_runs
    # before: the prompt was sliced from a negative offset and gsm8k was scored on garbage
    assert main(["eval", "model", str(a), "--tasks", "gsm8k", "--limit", "1", "--max-length", "8",
                 "--data-dir", str(DEMO_DATA), "--out", str(tmp_path / "r")]) == 2
    assert "leaves no room for a prompt" in capsys.readouterr().err


def test_malformed_benchmark_lines_are_one_clear_line(tmp_path, capsys):
    from evals.model.loglik import items_for

    data = tmp_path / "bench"
    shutil.copytree(DEMO_DATA, data)
    arc = data / "llm_foundry_gauntlet" / "world_knowledge" / "arc_easy.jsonl"
    lines = arc.read_text().splitlines()
    from manifests.errors import RecordError

    arc.write_text("\n".join(lines[:2] + ["{not json"] + lines[2:]) + "\n")
    # before: RecordError(str) raised a TypeError from the error path itself
    with pytest.raises(RecordError, match=r"arc_easy.jsonl \[line 3\]: not JSON"):
        items_for("arc_easy", data, None)
    row = json.loads(lines[0])
    row["gold"] = 99
    arc.write_text(json.dumps(row) + "\n")
    with pytest.raises(RecordError, match=r"\[record 1\]: gold 99 is not one of its"):
        items_for("arc_easy", data, None)
