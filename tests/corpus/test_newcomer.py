"""What a new user meets first: path errors that name their base, quiet logs, honest listings."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from corpus.executors import run_pipeline
from corpus.pipeline import load_pipeline, resolve_inputs
from manifests import Catalog
from manifests.cli import main as data_main
from manifests.errors import ConfigError

from ..conftest import write_jsonl

REPO = Path(__file__).resolve().parents[2]


def _pipeline(folder: Path, paths: list[str], root: Path) -> Path:
    spec = {"name": "tiny", "input": {"format": "jsonl", "paths": paths}, "output": {"root": str(root)},
            "executor": {"kind": "local", "workers": 1}, "stages": [{"text_stats_v1": {}}]}
    path = folder / "pipe.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_relative_input_paths_resolve_against_the_working_directory_and_the_error_says_so(tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    (conf / "in").mkdir(parents=True)
    write_jsonl(conf / "in" / "a.jsonl", [{"text": "one document"}])
    yaml_path = _pipeline(conf, ["in/*.jsonl"], tmp_path / "root")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(ConfigError) as err:
        resolve_inputs(load_pipeline(str(yaml_path)))
    msg = str(err.value)
    assert f"working directory {elsewhere}" in msg and "not the pipeline file's folder" in msg
    assert f"it does match relative to {yaml_path}'s folder: {conf}/in/*.jsonl" in msg
    monkeypatch.chdir(conf)  # from the folder the paths are written for, they resolve
    assert [f.key for f in resolve_inputs(load_pipeline(str(yaml_path)))] == ["a.jsonl"]


def test_demo_configs_resolve_from_the_repository_root(monkeypatch):
    monkeypatch.chdir(REPO)
    for path in sorted((REPO / "configs" / "demo").glob("*.yaml")):
        pipeline = load_pipeline(str(path.relative_to(REPO)))
        if pipeline.input.paths:
            assert resolve_inputs(pipeline), path


def test_progress_bars_print_no_cursor_codes_when_stderr_is_not_a_terminal(tmp_path, capfd):
    from corpus.executors.local import Progress

    assert not sys.stderr.isatty()  # pytest captures it
    assert Progress(["a", "b"], enabled=True).bars == {}
    write_jsonl(tmp_path / "a.jsonl", [{"text": f"document number {i}"} for i in range(50)])
    run_pipeline(load_pipeline(str(_pipeline(tmp_path, [str(tmp_path / "a.jsonl")], tmp_path / "root"))),
                 progress=True)
    err = capfd.readouterr().err
    assert "\x1b[" not in err and "\r" not in err


def test_data_ls_of_an_unknown_name_exits_nonzero_with_the_names(tmp_path, capsys):
    Catalog(str(tmp_path)).write_table("c4-clean", pa.table({"id": ["a"], "text": ["x"]}))
    assert data_main(["data", "--root", str(tmp_path), "ls", "c4-clean"]) == 0
    assert data_main(["data", "--root", str(tmp_path), "ls", "c4-clen"]) == 1
    assert "no dataset named 'c4-clen'" in capsys.readouterr().err
    assert data_main(["data", "--root", str(tmp_path), "ls", "nothing-like-it"]) == 1
    assert "names: c4-clean" in capsys.readouterr().err


def test_tokenizer_artifact_shows_its_vocabulary_not_rows(tmp_path, capsys, c4_docs):
    from corpus.mix.tokenizer import TokenizerTrainConfig, train_tokenizer

    cat = Catalog(str(tmp_path))
    cat.write_table("web", pa.table({"id": [str(i) for i in range(len(c4_docs))], "text": [d["text"] for d in c4_docs]}))
    train_tokenizer(cat, ["web"], TokenizerTrainConfig(vocab_size=400, num_threads=1), name="tok")
    assert data_main(["data", "--root", str(tmp_path), "ls"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert lines["tok"].split()[2] == "-" and lines["tok"].endswith("tokenizer")
    assert lines["web"].split()[2] == "300" and lines["web"].endswith("dataset")
    assert data_main(["data", "--root", str(tmp_path), "show", "tok"]) == 0
    out = capsys.readouterr().out
    assert "artifact:  tokenizer, vocabulary 400" in out and "rows:" not in out and "polars" not in out


def test_data_show_names_the_version_folder_that_polars_pandas_pyarrow_and_hf_datasets_read(tmp_path, capsys):
    import datasets
    import pandas as pd
    import polars as pl
    import pyarrow.dataset as ds

    table = pa.table({"id": [f"r{i}" for i in range(3000)], "text": [f"row {i * 7919 % 10007}" for i in range(3000)]})
    cat = Catalog(str(tmp_path))
    v = cat.write_table("t", table, target_bytes=4096)
    cat.write_table("t.rejects", pa.table({"id": ["gone"], "text": ["x"]}))  # a sibling name, not read
    assert len(v.manifest.shards) > 1  # a folder of several shards, as a real version is
    assert data_main(["data", "--root", str(tmp_path), "show", "t"]) == 0
    out = capsys.readouterr().out
    folder = next(x for x in out.splitlines() if x.strip().startswith("data:")).split("data:", 1)[1].strip()
    assert folder == v.directory.uri  # the version folder itself: its manifest lies beside it
    assert f"manifest:  {v.directory.uri}.manifest.json\n" in out
    want = sorted(table.column("id").to_pylist())
    assert sorted(pl.scan_parquet(folder).collect()["id"].to_list()) == want
    assert sorted(pd.read_parquet(folder)["id"].tolist()) == want
    assert sorted(ds.dataset(folder).to_table().column("id").to_pylist()) == want
    hf = datasets.load_dataset("parquet", data_dir=folder, split="train", cache_dir=str(tmp_path / "hf"))
    assert sorted(hf["id"]) == want
    assert f"duckdb.sql(\"SELECT * FROM read_parquet('{folder}/**/*.parquet')\")" in out


def test_ray_logs_stay_quiet_unless_verbose():
    from corpus.executors.ray import _quiet_ray

    root = logging.getLogger()
    old = root.level, logging.getLogger("ray").level
    try:
        root.setLevel(logging.INFO)  # `cidermill -v`
        logging.getLogger("ray").setLevel(logging.NOTSET)
        _quiet_ray()
        assert logging.getLogger("ray").level == logging.NOTSET
        root.setLevel(logging.WARNING)  # the default
        _quiet_ray()
        assert logging.getLogger("ray").level == logging.ERROR and logging.getLogger("ray.data").level == logging.ERROR
    finally:
        root.setLevel(old[0])
        logging.getLogger("ray").setLevel(old[1])


@pytest.mark.slow
@pytest.mark.ray
def test_a_ray_run_prints_no_ray_info_or_deprecation_lines(tmp_path):
    pytest.importorskip("ray")
    write_jsonl(tmp_path / "a.jsonl", [{"text": f"document number {i}"} for i in range(20)])
    yaml_path = _pipeline(tmp_path, [str(tmp_path / "a.jsonl")], tmp_path / "root")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "manifests.main", "corpus", "run", str(yaml_path), "--executor", "ray",
                           "--workers", "1", "--no-progress"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert " INFO " not in proc.stderr and "deprecated" not in proc.stderr, proc.stderr
    assert "rows      20" in proc.stdout
