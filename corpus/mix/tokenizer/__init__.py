"""Tokenizers: train SentencePiece BPE on dataset versions, store them as catalog artifacts, load
them (or an existing SentencePiece / Hugging Face file) behind one small interface."""

from corpus.mix.tokenizer.artifact import load_tokenizer, publish_tokenizer, tokenizer_identity
from corpus.mix.tokenizer.base import HFTokenizer, SentencePieceTokenizer, Tokenizer, tokenizer_from_bytes
from corpus.mix.tokenizer.train import TokenizerTrainConfig, train_tokenizer

__all__ = [
    "HFTokenizer", "SentencePieceTokenizer", "Tokenizer", "TokenizerTrainConfig", "load_tokenizer",
    "publish_tokenizer", "tokenizer_from_bytes", "tokenizer_identity", "train_tokenizer",
]
