"""`cidermill train export-hf CHECKPOINT --out DIR`: a transformers model folder in Qwen3's layout.

Qwen3 is an architecture transformers ships that matches AFM's exactly: pre-norm RMSNorm, RMSNorm on each
query and key head (before RoPE), grouped-query attention, SwiGLU MLP, RoPE (rotate-half), no biases, tied
input/output embeddings. The folder loads with `AutoModelForCausalLM.from_pretrained(DIR)` (and vLLM) with
no custom code.

Weight mapping (megatron-core local spec -> Qwen3), shapes for h=hidden, hd=head dim, nq/ng query/KV heads:
    embedding.word_embeddings.weight                 -> model.embed_tokens.weight             [V, h]
    decoder.layers.i.input_layernorm.weight          -> model.layers.i.input_layernorm.weight
    decoder.layers.i.self_attention.linear_qkv       [ng·(nq/ng + 2)·hd, h], per KV group: its nq/ng query
        heads, then its key head, then its value head -> q_proj [nq·hd, h], k_proj / v_proj [ng·hd, h]
    ...q_layernorm / k_layernorm                     -> self_attn.q_norm / k_norm             [hd]
    ...linear_proj                                   -> self_attn.o_proj
    decoder.layers.i.pre_mlp_layernorm               -> post_attention_layernorm (Qwen3's name for it)
    ...mlp.linear_fc1  [2·ffn, h] = [gate; up]       -> mlp.gate_proj, mlp.up_proj
    ...mlp.linear_fc2                                -> mlp.down_proj
    decoder.final_layernorm                          -> model.norm
Transformer Engine checkpoints keep the pre-norms inside the linear layers (`linear_qkv.layer_norm_weight`,
`linear_fc1.layer_norm_weight`); both namings are read.

Tokenizer: the one the checkpoint recorded and carries (training/checkpoint.py `checkpoint_tokenizer`).
    - `kind: bytes` (training/byte_mixture.py: token id = UTF-8 byte value, 0 = end of document): a
      byte-level BPE tokenizer.json with the 256 byte symbols and no merges, so id == byte value; loads with
      AutoTokenizer (PreTrainedTokenizerFast), `eos_token` = the symbol of byte 0.
    - `kind: sentencepiece`: tokenizer.model (the file itself) declared as a LlamaTokenizer without added
      BOS/EOS or prefix space, plus the tokenizer.json transformers converts from it; ids equal
      sentencepiece's on real text (tests/training/test_export_hf.py).
    - anything else (e.g. a tokenizer.json artifact): copied as tokenizer.json.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from manifests.errors import ConfigError, ManifestError

from . import checkpoint as ckpt


def _shape(info: ckpt.CheckpointInfo) -> dict:
    return dict(info.manifest["model_shape"])


def qwen3_config(info: ckpt.CheckpointInfo, *, eos_token_id: int | None, max_position_embeddings: int) -> dict:
    s = _shape(info)
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": s["vocab_size"],
        "hidden_size": s["hidden_size"],
        "intermediate_size": s["ffn_hidden_size"],
        "num_hidden_layers": s["num_layers"],
        "num_attention_heads": s["num_attention_heads"],
        "num_key_value_heads": s["num_query_groups"],
        "head_dim": s["head_dim"],
        "hidden_act": "silu",
        "max_position_embeddings": max_position_embeddings,
        "rms_norm_eps": 1e-5,  # training/model/gpt.py: layernorm_epsilon
        "tie_word_embeddings": True,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "rope_theta": float(info.manifest["rotary_base"]),  # transformers < 5 reads this key
        "rope_parameters": {"rope_type": "default", "rope_theta": float(info.manifest["rotary_base"])},
        "eos_token_id": eos_token_id,
        "bos_token_id": None,
        "pad_token_id": eos_token_id,
        "torch_dtype": "float32",
        "use_cache": True,
    }


def _megatron_state(info: ckpt.CheckpointInfo) -> dict[str, torch.Tensor]:
    if info.manifest["weights"] == "state_dict":
        state = torch.load(info.directory / "model.pt", map_location="cpu", weights_only=True)
        return {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    # a distributed checkpoint: rebuild the model (one process, TP=1) and take its full state dict
    from . import parallel
    from .trainer import load_model

    parallel.setup(parallel.ParallelConfig(kernels=info.manifest.get("kernels", "local")))
    model, _ = load_model(info.directory, seq_length=ckpt.seq_length_of(info))
    return {k: v.detach().cpu() for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)}


def convert_state(state: dict[str, torch.Tensor], shape: dict) -> dict[str, torch.Tensor]:
    """megatron-core GPTModel state dict (TP=1) -> Qwen3ForCausalLM state dict (see the module docstring)."""
    nq, ng, hd = shape["num_attention_heads"], shape["num_query_groups"], shape["head_dim"]
    h, ffn = shape["hidden_size"], shape["ffn_hidden_size"]

    def take(key: str, *alts: str) -> torch.Tensor:
        for k in (key, *alts):
            if k in state:
                return state[k].float().contiguous()
        raise ManifestError(f"export-hf: the checkpoint has no {key!r} (is it tensor-parallel sharded?)")

    out = {"model.embed_tokens.weight": take("embedding.word_embeddings.weight"),
           "model.norm.weight": take("decoder.final_layernorm.weight")}
    for i in range(shape["num_layers"]):
        m, q = f"decoder.layers.{i}.", f"model.layers.{i}."
        qkv = take(m + "self_attention.linear_qkv.weight")
        if qkv.shape != ((nq + 2 * ng) * hd, h):
            raise ManifestError(f"export-hf: layer {i} linear_qkv is {tuple(qkv.shape)}, expected "
                                f"{((nq + 2 * ng) * hd, h)} for this shape (tensor-parallel shard?)")
        per_group = qkv.view(ng, nq // ng + 2, hd, h)
        fc1 = take(m + "mlp.linear_fc1.weight")
        out.update({
            q + "input_layernorm.weight": take(m + "input_layernorm.weight",
                                               m + "self_attention.linear_qkv.layer_norm_weight"),
            q + "self_attn.q_proj.weight": per_group[:, : nq // ng].reshape(nq * hd, h).contiguous(),
            q + "self_attn.k_proj.weight": per_group[:, nq // ng].reshape(ng * hd, h).contiguous(),
            q + "self_attn.v_proj.weight": per_group[:, nq // ng + 1].reshape(ng * hd, h).contiguous(),
            q + "self_attn.q_norm.weight": take(m + "self_attention.q_layernorm.weight"),
            q + "self_attn.k_norm.weight": take(m + "self_attention.k_layernorm.weight"),
            q + "self_attn.o_proj.weight": take(m + "self_attention.linear_proj.weight"),
            q + "post_attention_layernorm.weight": take(m + "pre_mlp_layernorm.weight",
                                                        m + "mlp.linear_fc1.layer_norm_weight"),
            q + "mlp.gate_proj.weight": fc1[:ffn].contiguous(),
            q + "mlp.up_proj.weight": fc1[ffn:].contiguous(),
            q + "mlp.down_proj.weight": take(m + "mlp.linear_fc2.weight"),
        })
    return out


def byte_tokenizer_json(*, eod_id: int = 0) -> tuple[dict, str]:
    """tokenizers' JSON for the byte tokenizer: ByteLevel symbols (GPT-2's byte->unicode table), BPE with no
    merges, so each byte is one token whose id is the byte value."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    symbol = bytes_to_unicode()
    vocab = {symbol[b]: b for b in range(256)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return json.loads(tok.to_str()), symbol[eod_id]


def write_tokenizer(tok: dict, out: Path) -> int | None:
    """Write tokenizer files into `out`; returns the end-of-document id."""
    kind = tok.get("kind")
    eod_id = tok.get("eod_id")
    config = {"model_max_length": 1 << 30, "clean_up_tokenization_spaces": False}
    if kind == "bytes":
        body, eos = byte_tokenizer_json(eod_id=int(eod_id))
        (out / "tokenizer.json").write_text(json.dumps(body))
        config.update(tokenizer_class="PreTrainedTokenizerFast", eos_token=eos, pad_token=eos)
    elif kind == "sentencepiece" or str(tok.get("model_file", "")).endswith(".model"):
        # the .model file as is, declared as a Llama (SentencePiece) tokenizer with no BOS/EOS added and no
        # prefix space (the project trains with add_dummy_prefix=False); transformers converts it on load,
        # and save_pretrained then writes the converted tokenizer.json beside it (for vLLM / fast loading)
        from transformers import AutoTokenizer

        shutil.copyfile(tok["model_file"], out / "tokenizer.model")
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(out / "tokenizer.model"))
        piece = lambda i: sp.id_to_piece(i) if 0 <= i < sp.get_piece_size() else None  # noqa: E731
        config.update(tokenizer_class="LlamaTokenizer", add_bos_token=False, add_eos_token=False, legacy=False,
                      add_prefix_space=False, eos_token=piece(int(eod_id)), unk_token=piece(sp.unk_id()),
                      bos_token=piece(sp.bos_id()), pad_token=piece(sp.pad_id()) or piece(int(eod_id)))
        (out / "tokenizer_config.json").write_text(json.dumps({k: v for k, v in config.items() if v is not None},
                                                              indent=2))
        AutoTokenizer.from_pretrained(str(out)).save_pretrained(str(out))
        return eod_id
    elif tok.get("model_file"):
        shutil.copyfile(tok["model_file"], out / "tokenizer.json")
        config.update(tokenizer_class="PreTrainedTokenizerFast")
    else:
        raise ConfigError(f"export-hf: cannot export tokenizer {tok}")
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    (out / "special_tokens_map.json").write_text(json.dumps(
        {k: config[k] for k in ("eos_token", "pad_token") if k in config}, indent=2))
    return eod_id


def export_hf(checkpoint: str | Path, out: str | Path, *, max_position_embeddings: int | None = None,
              tokenizer: bool = True) -> Path:
    """Write config.json, model.safetensors, tokenizer files and export.json (provenance) into `out`.

    The folder is written under a temporary name and renamed into place. `out` must be new or empty, or
    hold an earlier export of the same weights (then it is replaced whole): exporting into another folder's
    files would mix two models' files without a word."""
    info = ckpt.open_checkpoint(checkpoint)
    out = Path(out)
    wid = ckpt.weights_id(info)
    _check_target(out, wid)
    partial = out.parent / f".{out.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        _write_export(info, partial, wid, max_position_embeddings=max_position_embeddings, tokenizer=tokenizer)
        ckpt.commit_dir(partial, out)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return out


def _check_target(out: Path, wid: str) -> None:
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    if not out.is_dir():
        raise ConfigError(f"export-hf: {out} is a file; give a folder")
    try:
        previous = json.loads((out / "export.json").read_text()).get("weights_id")
    except (OSError, ValueError):
        previous = None
    if previous != wid:
        what = "an export of other weights" if previous else "files that are not an export"
        raise ConfigError(f"export-hf: {out} is not empty (it holds {what}); give a new or empty folder")


def _write_export(info, out: Path, wid: str, *, max_position_embeddings, tokenizer: bool) -> None:
    from safetensors.torch import save_file

    tok = ckpt.checkpoint_tokenizer(info) if tokenizer else {}
    eod_id = write_tokenizer(tok, out) if tokenizer else info.manifest["data"].get("eod_id")
    weights = convert_state(_megatron_state(info), _shape(info))
    # tied embeddings: transformers re-ties lm_head to embed_tokens on load, so only one copy is stored
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    max_pos = max_position_embeddings or max(int(ckpt.seq_length_of(info)), 4096)
    (out / "config.json").write_text(json.dumps(
        qwen3_config(info, eos_token_id=eod_id, max_position_embeddings=max_pos), indent=2))
    (out / "generation_config.json").write_text(json.dumps(
        {"eos_token_id": eod_id, "pad_token_id": eod_id, "do_sample": False}, indent=2))
    (out / "export.json").write_text(json.dumps({
        "checkpoint": str(info.directory.resolve()), "weights_id": wid, "run": info.manifest.get("run"),
        "stage": info.manifest.get("stage"), "step": info.manifest.get("step"),
        "data": info.manifest["data"].get("source_id"), "tokenizer": {k: v for k, v in tok.items()
                                                                       if k != "model_file"},
        "architecture": "Qwen3ForCausalLM"}, indent=2))
