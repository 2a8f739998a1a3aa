"""Small random transformers models of each imported family, saved as model folders (config.json,
model.safetensors, a real BPE tokenizer trained on the bundled C4 sample), for the import-hf tests."""

from __future__ import annotations

from pathlib import Path

import torch

TINY = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=512)

# (name, config class, extra config) covering: tied and untied embeddings, GQA and plain MHA, Qwen2's q/k/v
# biases, Qwen3's q/k norms, RoPE scaling (llama3 and linear), eps other than AFM's
FAMILIES = {
    "llama-gqa-untied": ("LlamaConfig", dict(num_key_value_heads=2, tie_word_embeddings=False, rms_norm_eps=1e-6)),
    "llama-tied-llama3-rope": ("LlamaConfig", dict(
        num_key_value_heads=1, tie_word_embeddings=True, rope_theta=500000.0, rms_norm_eps=1e-5,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 64})),
    "qwen2-bias-linear-rope": ("Qwen2Config", dict(num_key_value_heads=2, tie_word_embeddings=False,
                                                   rope_scaling={"rope_type": "linear", "factor": 4.0})),
    "qwen2-tied-mha": ("Qwen2Config", dict(num_key_value_heads=4, tie_word_embeddings=True)),
    "qwen3-qknorm-untied": ("Qwen3Config", dict(num_key_value_heads=2, head_dim=32, tie_word_embeddings=False)),
    "qwen3-tied": ("Qwen3Config", dict(num_key_value_heads=1, tie_word_embeddings=True)),
}


def bpe_tokenizer_folder(texts: list[str], out: Path, *, vocab_size: int = 400):
    """A byte-level BPE tokenizer trained on `texts`, saved as a transformers tokenizer folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<|endoftext|>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<pad>")
    fast.save_pretrained(str(out))
    return fast


def make_family(kind: str, out: Path, texts: list[str], *, seed: int = 0) -> Path:
    """A random model of family `kind` (FAMILIES) with a real tokenizer, saved to `out`."""
    import transformers

    cls_name, extra = FAMILIES[kind]
    out.mkdir(parents=True, exist_ok=True)
    tok = bpe_tokenizer_folder(texts, out)
    config = getattr(transformers, cls_name)(vocab_size=len(tok), **TINY, **extra)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():  # random norm gains and biases, so a swapped or dropped one shows in the logits
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith(".bias"):
                p.copy_(1.0 + 0.3 * torch.randn_like(p) if "norm" in name else 0.5 * torch.randn_like(p))
            elif name.endswith(("q_proj.weight", "k_proj.weight")):  # sharper attention: RoPE errors show more
                p.mul_(3.0)
    model.save_pretrained(str(out))
    return out
