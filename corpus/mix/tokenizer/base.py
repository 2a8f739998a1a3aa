"""One small Tokenizer interface over SentencePiece models and Hugging Face `tokenizer.json` files.

Both load from bytes, so a tokenizer stored in the catalog is used without a temporary file, and
both are picklable (they re-load from their bytes), so process pools can ship them to workers.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from typing import Sequence

from manifests.errors import ConfigError

# Tried in order when a Hugging Face tokenizer file does not say which token ends a document.
_HF_EOD_CANDIDATES = ("<|endoftext|>", "</s>", "<eos>", "<|end_of_text|>", "<|eot_id|>", "[SEP]")


class Tokenizer(ABC):
    """Text <-> token ids. `eod_id` is appended after every document when tokenizing a corpus."""

    kind: str  # "sentencepiece" | "hf_tokenizers"

    def __init__(self, model_bytes: bytes, *, name: str):
        self.model_bytes = model_bytes
        self.name = name
        self.model_sha256 = hashlib.sha256(model_bytes).hexdigest()

    @property
    @abstractmethod
    def vocab_size(self) -> int: ...

    @property
    @abstractmethod
    def eod_id(self) -> int: ...

    @property
    def pad_id(self) -> int:
        """Megatron masks pad ids out of the loss; with no pad token we reuse EOD (as Megatron does)."""
        return self.eod_id

    @abstractmethod
    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of each text, without BOS/EOS: documents are delimited by `eod_id` by the caller."""

    @abstractmethod
    def decode(self, ids: Sequence[int]) -> str: ...

    def encode(self, text: str) -> list[int]:
        return self.encode_batch([text])[0]

    @property
    def model_file_name(self) -> str:
        return "tokenizer.model" if self.kind == "sentencepiece" else "tokenizer.json"

    def describe(self) -> dict:
        """The facts a manifest records about this tokenizer."""
        return {"name": self.name, "kind": self.kind, "vocab_size": self.vocab_size,
                "eod_id": self.eod_id, "pad_id": self.pad_id, "model_sha256": self.model_sha256}

    def __reduce__(self):
        return (_rebuild, (type(self), self.model_bytes, self.name, self._extra_state()))

    def _extra_state(self) -> dict:
        return {}


def _rebuild(cls, model_bytes: bytes, name: str, extra: dict) -> "Tokenizer":
    return cls(model_bytes, name=name, **extra)


class SentencePieceTokenizer(Tokenizer):
    kind = "sentencepiece"

    def __init__(self, model_bytes: bytes, *, name: str):
        import sentencepiece as spm

        super().__init__(model_bytes, name=name)
        try:
            self._sp = spm.SentencePieceProcessor(model_proto=model_bytes)
        except Exception as exc:  # sentencepiece raises RuntimeError/OSError with a terse message
            raise ConfigError(f"tokenizer {name}: not a SentencePiece model ({exc})") from exc
        # Training sets eos; a model without one cannot delimit documents.
        if self._sp.eos_id() < 0:
            raise ConfigError(f"tokenizer {name}: the SentencePiece model has no EOS piece to use as EOD")

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size()

    @property
    def eod_id(self) -> int:
        return self._sp.eos_id()

    @property
    def pad_id(self) -> int:
        pad = self._sp.pad_id()
        return pad if pad >= 0 else self.eod_id

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        # One call per text: measured ~2x faster than sentencepiece's own batch `encode(list)` with
        # one thread (0.2.3); parallelism comes from worker processes instead.
        encode = self._sp.encode_as_ids
        return [encode(t) for t in texts]

    def decode(self, ids: Sequence[int]) -> str:
        return self._sp.decode([int(i) for i in ids])

    def pieces(self, text: str) -> list[str]:
        return self._sp.encode(text, out_type=str)


class HFTokenizer(Tokenizer):
    """A Hugging Face `tokenizers` file (tokenizer.json). EOD is `eod_token`, else a common end token."""

    kind = "hf_tokenizers"

    def __init__(self, model_bytes: bytes, *, name: str, eod_token: str | None = None):
        from tokenizers import Tokenizer as HFCore

        super().__init__(model_bytes, name=name)
        try:
            self._tok = HFCore.from_str(model_bytes.decode("utf-8"))
        except Exception as exc:
            raise ConfigError(f"tokenizer {name}: not a Hugging Face tokenizer.json ({exc})") from exc
        candidates = [eod_token] if eod_token else list(_HF_EOD_CANDIDATES)
        for token in candidates:
            tid = self._tok.token_to_id(token)
            if tid is not None:
                self._eod, self.eod_token = tid, token
                break
        else:
            raise ConfigError(f"tokenizer {name}: no end-of-document token among {candidates}; "
                              "pass eod_token= (e.g. --eod-token '<|endoftext|>')")

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    @property
    def eod_id(self) -> int:
        return self._eod

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=False)

    def _extra_state(self) -> dict:
        return {"eod_token": self.eod_token}


def tokenizer_from_bytes(model_bytes: bytes, *, name: str, kind: str | None = None,
                         eod_token: str | None = None) -> Tokenizer:
    """Build a tokenizer from a model file's bytes; `kind` is sniffed when not given (JSON -> HF)."""
    if kind is None:
        kind = "hf_tokenizers" if model_bytes.lstrip()[:1] == b"{" else "sentencepiece"
    if kind == "sentencepiece":
        return SentencePieceTokenizer(model_bytes, name=name)
    if kind == "hf_tokenizers":
        return HFTokenizer(model_bytes, name=name, eod_token=eod_token)
    raise ConfigError(f"tokenizer {name}: unknown kind {kind!r}; use sentencepiece or hf_tokenizers")
