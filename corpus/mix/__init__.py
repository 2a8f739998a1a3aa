"""Dataset versions -> Megatron indexed datasets (.bin/.idx), and mixtures built over them."""

from corpus.mix.tokenize_run import KIND, TokenizeConfig, find_tokenized, prefix_of, tokenize_version, token_dtype

__all__ = ["KIND", "TokenizeConfig", "find_tokenized", "prefix_of", "token_dtype", "tokenize_version"]
