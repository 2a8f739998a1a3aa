"""Train a SentencePiece BPE tokenizer on a sample of dataset versions (AFM report 3.1.6 settings).

The report's settings, all defaults here: BPE; numbers split into single digits (`split_digits`);
byte fallback, so any UTF-8 the vocabulary lacks still encodes, as its bytes; no Unicode
normalisation (`normalization_rule_name=identity`). On top of those, whitespace is kept as written
(no dummy prefix, no squeezing of repeated spaces) so that decode(encode(text)) == text, byte for
byte. Vocabulary: 49k on-device, 100k server, a few thousand for tests.

The sample is drawn per version with a seeded generator over its shards in order, so the same
versions and config always give the same sample, hence the same model bytes and artifact id.
"""

from __future__ import annotations

import io
import logging
import time
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from manifests import Catalog, DatasetVersion
from manifests.errors import ConfigError
from manifests.manifest import PipelineInfo, config_hash

from manifests.config import config_to_dict, parse_size, require
from corpus.mix.tokenizer.artifact import publish_tokenizer
from corpus.mix.tokenizer.base import SentencePieceTokenizer

log = logging.getLogger("cidermill.tokenizer")


@dataclass(frozen=True, kw_only=True)
class TokenizerTrainConfig:
    vocab_size: int = 49152
    model_type: str = "bpe"
    text_field: str = "text"
    sample_docs: int = 500_000  # at most this many documents per version
    sample_bytes: int | str = "1GB"  # and at most this much text in total
    character_coverage: float = 0.9999  # rarer characters are left to byte fallback
    max_sentence_bytes: int = 16384  # longer lines are cut (SentencePiece skips over-long lines)
    split_digits: bool = True
    byte_fallback: bool = True
    normalization_rule_name: str = "identity"
    num_threads: int = 2
    seed: int = 0

    def __post_init__(self):
        require(self.vocab_size >= 300, f"vocab_size must be >= 300 (256 byte pieces + specials); got {self.vocab_size}")
        require(self.model_type in ("bpe", "unigram"), f"model_type must be bpe or unigram; got {self.model_type!r}")
        require(self.sample_docs > 0, f"sample_docs must be > 0; got {self.sample_docs}")
        object.__setattr__(self, "sample_bytes", parse_size(self.sample_bytes, key="sample_bytes",
                                                             where="tokenizer training"))
        require(self.sample_bytes > 0, "sample_bytes must be > 0")
        require(0.9 <= self.character_coverage <= 1.0,
                f"character_coverage must be in [0.9, 1]; got {self.character_coverage}")
        require(self.max_sentence_bytes >= 256, f"max_sentence_bytes must be >= 256; got {self.max_sentence_bytes}")
        require(self.num_threads >= 1, f"num_threads must be >= 1; got {self.num_threads}")

    def spm_options(self) -> dict:
        return dict(
            model_type=self.model_type,
            vocab_size=self.vocab_size,
            split_digits=self.split_digits,
            byte_fallback=self.byte_fallback,
            normalization_rule_name=self.normalization_rule_name,
            # Byte-exact round trips: keep every space and newline as written.
            add_dummy_prefix=False,
            remove_extra_whitespaces=False,
            allow_whitespace_only_pieces=True,
            character_coverage=self.character_coverage,
            max_sentence_length=self.max_sentence_bytes,
            # Fixed special ids: 0 unk, 1 bos, 2 eos (= EOD between documents), 3 pad.
            unk_id=0, bos_id=1, eos_id=2, pad_id=3,
            # A small corpus may not fill the vocabulary; take what it supports instead of failing.
            hard_vocab_limit=False,
            num_threads=self.num_threads,
            seed_sentencepiece_size=1_000_000,
            shuffle_input_sentence=False,  # our sample is already drawn; keep its order
            input_sentence_size=0,
            minloglevel=2,
        )


@dataclass
class SampleStats:
    documents: int = 0
    lines: int = 0
    bytes: int = 0


def sample_lines(versions: list[DatasetVersion], config: TokenizerTrainConfig,
                 stats: SampleStats) -> Iterator[str]:
    """Yield training lines from a seeded sample of each version's documents."""
    budget_per_version = config.sample_bytes // max(1, len(versions))
    for vi, version in enumerate(versions):
        field = config.text_field
        kind = version.schema.field(field).type if field in version.schema.names else None
        if kind is None or not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise ConfigError(f"{version.name}@{version.version_id[:12]}: no string column {field!r} to train "
                              f"on (columns: {', '.join(version.schema.names)}); set text_field")
        fraction = min(1.0, config.sample_docs / max(1, version.manifest.rows))
        rng = np.random.default_rng([config.seed, vi])
        used = 0
        for batch in version.iter_batches(columns=[field], batch_rows=4096):
            col = batch.column(0)
            keep = rng.random(len(col)) < fraction
            for text in pc.filter(col, pa.array(keep)).to_pylist():
                if not text:
                    continue
                stats.documents += 1
                for line in text.split("\n"):
                    if not line:
                        continue
                    raw = line.encode("utf-8")
                    if len(raw) > config.max_sentence_bytes:
                        line = raw[: config.max_sentence_bytes].decode("utf-8", "ignore")
                        raw = line.encode("utf-8")
                    stats.lines += 1
                    stats.bytes += len(raw)
                    used += len(raw)
                    yield line
                if used >= budget_per_version:
                    break
            if used >= budget_per_version:
                break


def train_tokenizer(catalog: Catalog, refs: list[str], config: TokenizerTrainConfig, *,
                    name: str | None = None) -> DatasetVersion:
    """Train on a sample of the versions `refs`; publish the model as catalog artifact `name`."""
    import sentencepiece as spm

    if not refs:
        raise ConfigError("train-tokenizer: give at least one dataset version to train on")
    versions = [catalog.resolve(r) for r in refs]
    name = name or f"{config.model_type}-{config.vocab_size}"
    stats = SampleStats()
    start = time.perf_counter()
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=sample_lines(versions, config, stats), model_writer=model, **config.spm_options())
    seconds = time.perf_counter() - start
    if stats.lines == 0:
        raise ConfigError(f"train-tokenizer: the sample of {refs} holds no text in {config.text_field!r}")
    tok = SentencePieceTokenizer(model.getvalue(), name=name)
    if tok.vocab_size < config.vocab_size:
        log.warning("tokenizer %s: the sample supports %d pieces, fewer than vocab_size %d (sample more text)",
                    name, tok.vocab_size, config.vocab_size)
    settings = config_to_dict(config)
    trained_on = [{"name": v.name, "version_id": v.version_id, "ref": r} for v, r in zip(versions, refs)]
    pipeline = PipelineInfo(name="train_tokenizer", stages=[{"name": "sentencepiece_train_v1", "config": settings}],
                            config={"inputs": trained_on, "settings": settings}, code_revision=_code_revision(),
                            config_sha256=config_hash({"inputs": trained_on, "settings": settings}))
    sample = {"documents": stats.documents, "lines": stats.lines, "bytes": stats.bytes,
              "seconds": round(seconds, 2)}
    log.info("trained %s: %d pieces on %d docs (%.1f MB) in %.1f s", name, tok.vocab_size,
             stats.documents, stats.bytes / 1e6, seconds)
    return publish_tokenizer(catalog, tok, name=name, settings=settings, trained_on=trained_on,
                             sample=sample, pipeline=pipeline)


def _code_revision() -> str:
    from manifests.manifest import code_revision

    return code_revision()
