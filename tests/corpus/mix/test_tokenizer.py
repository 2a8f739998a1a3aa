"""Tokenizer training: the report's settings, byte-exact round trips on real multilingual pages,
single-digit numbers, the artifact manifest, and existing tokenizer files."""

from __future__ import annotations

import hashlib
import re

import pytest

from corpus.mix.tokenizer import HFTokenizer, TokenizerTrainConfig, load_tokenizer, train_tokenizer
from manifests.errors import ConfigError

from tests.corpus.mix.conftest import SHARED

WARCS = [SHARED / "warc" / "resiliparse" / "warcfile.warc.gz", SHARED / "warc" / "resiliparse" / "clueweb-quirk.warc.gz"]


def _charset(content_type: str, body: bytes) -> str | None:
    m = re.search(r"charset=[\"']?([\w-]+)", content_type or "", re.I) or \
        re.search(rb"charset=[\"']?([\w-]+)", body[:4096], re.I)
    if not m:
        return None
    name = m.group(1)
    return name.decode("ascii", "ignore") if isinstance(name, bytes) else name


def multilingual_pages() -> list[str]:
    """Real Common Crawl / ClueWeb pages (Chinese, Russian, Japanese, Dutch, ...), decoded with their charset."""
    fastwarc = pytest.importorskip("fastwarc.warc")
    pages = []
    for path in WARCS:
        if not path.exists():
            pytest.skip(f"shared data missing: {path}")
        with open(path, "rb") as f:
            for rec in fastwarc.ArchiveIterator(f, record_types=fastwarc.WarcRecordType.response, parse_http=True):
                body = rec.reader.read()
                ctype = rec.http_headers.get("Content-Type", "") if rec.http_headers else ""
                declared = _charset(ctype, body) or "utf-8"
                if declared.lower() in ("gb2312", "gbk"):
                    declared = "gb18030"  # the superset browsers use for these labels
                # ClueWeb09-ja pages often declare nothing: they are EUC-JP or Shift_JIS.
                for enc in ("utf-8", declared, "euc-jp", "shift_jis"):
                    try:
                        pages.append(body.decode(enc))
                        break
                    except (UnicodeDecodeError, LookupError):
                        continue
    return pages


def test_training_uses_the_report_settings(catalog, tokenizer_version, tokenizer):
    info = tokenizer_version.manifest.extra["tokenizer"]
    assert tokenizer_version.manifest.extra["kind"] == "tokenizer"
    assert info["settings"]["split_digits"] is True
    assert info["settings"]["byte_fallback"] is True
    assert info["settings"]["normalization_rule_name"] == "identity"
    assert info["settings"]["model_type"] == "bpe"
    assert info["vocab_size"] == tokenizer.vocab_size == 1024
    model = tokenizer_version.directory.join("tokenizer.model").read_bytes()
    assert info["model_sha256"] == hashlib.sha256(model).hexdigest() == tokenizer.model_sha256
    assert [t["name"] for t in info["trained_on"]] == ["web", "wiki", "code"]
    assert tokenizer_version.manifest.parents == [catalog.resolve(n).version_id for n in ("web", "wiki", "code")]
    assert info["sample"]["documents"] > 400
    assert tokenizer_version.verify() == []
    # the proto itself carries the settings
    import sentencepiece.sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.ParseFromString(model)
    assert proto.trainer_spec.split_digits and proto.trainer_spec.byte_fallback
    assert proto.normalizer_spec.name == "identity"
    assert proto.trainer_spec.model_type == pb.TrainerSpec.BPE


def test_round_trips_real_multilingual_pages_byte_exactly(tokenizer):
    pages = multilingual_pages()
    assert len(pages) >= 40
    scripts = {"CJK": r"[\u4e00-\u9fff]", "Cyrillic": r"[\u0400-\u04ff]", "Japanese kana": r"[\u3040-\u30ff]"}
    for script, pattern in scripts.items():
        assert any(re.search(pattern, p) for p in pages), f"no {script} page in the fixtures"
    for page in pages:
        ids = tokenizer.encode(page)
        assert tokenizer.decode(ids).encode("utf-8") == page.encode("utf-8")
        assert 0 not in ids  # no <unk>: unseen characters fall back to bytes


def test_round_trips_whitespace_and_rare_characters(tokenizer):
    text = "  two leading spaces\n\n\ttab, trailing   \r\nemoji 🍏, math ∑ x² ≤ 10⁶, ﬁ ligature, Ａ fullwidth "
    assert tokenizer.decode(tokenizer.encode(text)) == text  # identity normalisation keeps ﬁ and Ａ


def test_numbers_split_into_single_digits(tokenizer):
    pieces = tokenizer.pieces("In 2024 the 1234567 users paid 3.14 each")
    digit_pieces = [p for p in pieces if any(c.isdigit() for c in p)]
    assert "".join(digit_pieces).replace("▁", "").replace(".", "") == "2024123456731" + "4"
    assert all(len(p.replace("▁", "")) == 1 for p in digit_pieces)


def test_same_sample_same_settings_same_artifact(catalog, tokenizer_version):
    again = train_tokenizer(catalog, ["web", "wiki", "code"], TokenizerTrainConfig(vocab_size=1024), name="test-bpe")
    assert again.version_id == tokenizer_version.version_id


def test_config_errors_say_the_fix(catalog):
    from manifests.config import build_config

    with pytest.raises(ConfigError, match="vocab_size must be >= 300"):
        build_config(TokenizerTrainConfig, {"vocab_size": 100}, where="t")
    with pytest.raises(ConfigError, match="no string column 'body'"):
        train_tokenizer(catalog, ["web"], TokenizerTrainConfig(vocab_size=500, text_field="body"), name="x")
    with pytest.raises(ConfigError, match="not a file and not in the catalog"):
        load_tokenizer("no-such-tokenizer", catalog=catalog)
    with pytest.raises(ConfigError, match="not a tokenizer artifact"):
        load_tokenizer("web", catalog=catalog)


@pytest.mark.shared_data  # trains on the Wikipedia sample (wiki_texts)
def test_existing_hf_tokenizer_file_is_accepted(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders

    from tests.corpus.mix.conftest import wiki_texts

    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.train_from_iterator(wiki_texts(), trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"],
                                                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    tok = load_tokenizer(str(path))
    assert isinstance(tok, HFTokenizer)
    assert tok.eod_id == hf.token_to_id("<|endoftext|>")
    assert tok.artifact["model_file"] == str(path)
    text = "Ünïcode and numbers 42"
    assert tok.decode(tok.encode(text)) == text
    with pytest.raises(ConfigError, match="no end-of-document token"):
        load_tokenizer(str(path), eod_token="<eos-missing>")
    # and it tokenizes a dataset version like a SentencePiece model does
    from corpus.mix import TokenizeConfig, tokenize_version
    from manifests import Catalog

    import pyarrow as pa

    cat = Catalog(str(tmp_path / "root"))
    texts = wiki_texts()[:6]
    v = tokenize_version(cat, cat.write_table("w", pa.table({"text": texts})), tok, TokenizeConfig(rows_per_task=2))
    assert v.manifest.extra["tokenizer"]["kind"] == "hf_tokenizers"
    assert v.manifest.extra["tokenizer"]["model_file"] == str(path)
    assert v.manifest.tokens == sum(len(tok.encode(t)) + 1 for t in texts)
