"""Shared fixtures: a small catalog of real text (C4 web pages, Wikipedia, licensed source files) and a
tokenizer trained on it, built once per test session (megatron-core's import alone takes seconds)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

from manifests import Catalog

REPO = Path(__file__).resolve().parents[3]
SHARED = Path(os.environ.get("CIDERMILL_SHARED_DATA", REPO / ".." / "shared" / "data"))
C4 = REPO / "data" / "samples" / "c4" / "c4_demo.jsonl.gz"
WIKI = SHARED / "web_text" / "llamafactory_demo" / "wiki_demo.txt"
CODE = SHARED / "code_licensed" / "files"


def _table(texts: list[str], source: str) -> pa.Table:
    return pa.table({"id": [f"{source}-{i}" for i in range(len(texts))], "source": [source] * len(texts),
                     "text": texts})


def c4_texts() -> list[str]:
    with gzip.open(C4, "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def wiki_texts() -> list[str]:
    if not WIKI.exists():
        pytest.skip(f"shared data missing: {WIKI}")  # callers carry @pytest.mark.shared_data
    return [line for line in WIKI.read_text(encoding="utf-8").splitlines() if line.strip()]


def code_texts(limit: int = 120) -> list[str]:
    if not CODE.exists():
        pytest.skip(f"shared data missing: {CODE}")
    out = []
    for p in sorted(CODE.rglob("*")):
        if p.is_file() and p.suffix in {".py", ".rs", ".c", ".h", ".js", ".rb", ".go"}:
            try:
                out.append(p.read_text(encoding="utf-8"))
            except UnicodeDecodeError:
                continue
        if len(out) >= limit:
            break
    return out


@pytest.fixture(scope="session")
def catalog(tmp_path_factory, shared_data) -> Catalog:
    """web (300 C4 docs), wiki (30 Wikipedia articles), code (licensed source files), and an empty one."""
    root = tmp_path_factory.mktemp("catalog")
    cat = Catalog(str(root))
    cat.write_table("web", _table(c4_texts(), "c4"))
    cat.write_table("wiki", _table(wiki_texts(), "wikipedia"))
    cat.write_table("code", _table(code_texts(), "code_licensed"))
    cat.write_table("empty", _table([], "none"), schema=_table(["x"], "x").schema)
    return cat


@pytest.fixture(scope="session")
def tokenizer_version(catalog):
    from corpus.mix.tokenizer import TokenizerTrainConfig, train_tokenizer

    return train_tokenizer(catalog, ["web", "wiki", "code"], TokenizerTrainConfig(vocab_size=1024), name="test-bpe")


@pytest.fixture(scope="session")
def tokenizer(catalog, tokenizer_version):
    from corpus.mix.tokenizer import load_tokenizer

    return load_tokenizer("test-bpe", catalog=catalog)
