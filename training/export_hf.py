"""`cidermill train export-hf CHECKPOINT --out DIR`: a transformers model folder in the layout of the
architecture transformers ships that matches the checkpoint's shape (training/model/shapes.py):

    AFM (qk-norm, no biases)           -> Qwen3ForCausalLM: pre-norm RMSNorm, RMSNorm on each query and key
                                          head (before RoPE), GQA, SwiGLU, RoPE (rotate-half), no biases
    no qk-norm, query/key/value biases -> Qwen2ForCausalLM (biases on q/k/v only, as Qwen2 has them)
    no qk-norm, no biases              -> LlamaForCausalLM (Llama 2/3, SmolLM2, Mistral without a window)
Tied embeddings are stored once (`tie_word_embeddings`); untied ones as `lm_head.weight`. The norms' eps, the
RoPE base and its scaling (linear, llama3) go into config.json. The folder loads with
`AutoModelForCausalLM.from_pretrained(DIR)` (and vLLM) with no custom code.

Weight mapping (megatron-core local spec -> the HF layout), shapes for h=hidden, hd=head dim, nq/ng query/KV heads:
    embedding.word_embeddings.weight                 -> model.embed_tokens.weight             [V, h]
    decoder.layers.i.input_layernorm.weight          -> model.layers.i.input_layernorm.weight
    decoder.layers.i.self_attention.linear_qkv       [ng·(nq/ng + 2)·hd, h], per KV group: its nq/ng query
        heads, then its key head, then its value head -> q_proj [nq·hd, h], k_proj / v_proj [ng·hd, h]
    ...linear_qkv.bias (qkv_bias) [ng·(nq/ng + 2)·hd] -> q_proj / k_proj / v_proj .bias, the same regrouping
    ...q_layernorm / k_layernorm (qk_norm)          -> self_attn.q_norm / k_norm             [hd]
    ...linear_proj                                   -> self_attn.o_proj
    decoder.layers.i.pre_mlp_layernorm               -> post_attention_layernorm (Qwen3's name for it)
    ...mlp.linear_fc1  [2·ffn, h] = [gate; up]       -> mlp.gate_proj, mlp.up_proj
    ...mlp.linear_fc2                                -> mlp.down_proj
    decoder.final_layernorm                          -> model.norm
    output_layer.weight (untied embeddings only)     -> lm_head.weight                        [V, h]
Transformer Engine checkpoints keep the pre-norms inside the linear layers (`linear_qkv.layer_norm_weight`,
`linear_fc1.layer_norm_weight`); both namings are read.

Tokenizer: the one the checkpoint recorded and carries (training/checkpoint.py `checkpoint_tokenizer`).
    - `kind: bytes` (training/byte_mixture.py: token id = UTF-8 byte value, 0 = end of document): a
      byte-level BPE tokenizer.json with the 256 byte symbols and no merges, so id == byte value; loads with
      AutoTokenizer (PreTrainedTokenizerFast), `eos_token` = the symbol of byte 0.
    - `kind: sentencepiece`: tokenizer.model (the file itself) declared as a LlamaTokenizer without added
      BOS/EOS or prefix space, plus the tokenizer.json transformers converts from it; ids equal
      sentencepiece's on real text (tests/training/test_export_hf.py).
    - a Hugging Face tokenizer an import stored (`hf_files`: tokenizer.json, tokenizer_config.json, ...):
      those files as they are, so the export tokenizes as the source model did.
    - anything else (e.g. a tokenizer.json artifact): copied as tokenizer.json.
config.json and generation_config.json take eos/pad/bos ids from the tokenizer folder just written, so the
two always agree (the tokenizer's pad token, not EOS, when it has one). The project's tokenizers get the
project's chat template as `chat_template` (training.chat.CIDERMILL_JINJA); an imported tokenizer keeps its own.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from manifests.errors import ConfigError, ManifestError

from . import checkpoint as ckpt
from .chat import CIDERMILL_JINJA


def _shape(info: ckpt.CheckpointInfo) -> dict:
    return dict(info.manifest["model_shape"])


def hf_architecture(shape: dict) -> tuple[str, str]:
    """(architecture, model_type) of the transformers class that matches the shape's switches."""
    qk_norm, qkv_bias = shape.get("qk_norm", True), shape.get("qkv_bias", False)
    if qk_norm and not qkv_bias:
        return "Qwen3ForCausalLM", "qwen3"
    if qkv_bias and not qk_norm:
        return "Qwen2ForCausalLM", "qwen2"
    if not qk_norm and not qkv_bias:
        return "LlamaForCausalLM", "llama"
    raise ConfigError(f"export-hf: shape {shape.get('name')} has qk-norm and query/key/value biases; no transformers "
                      "architecture has both without biases on the output projection (Qwen3 attention_bias)")


def rope_config(shape: dict) -> dict:
    """HF's rope parameters for the shape's RoPE scaling (training/model/rope.py), without rope_theta."""
    kind = shape.get("rope_scaling", "none")
    if kind == "none":
        return {"rope_type": "default"}
    if kind == "linear":
        return {"rope_type": "linear", "factor": float(shape["rope_factor"])}
    return {"rope_type": "llama3", "factor": float(shape["rope_factor"]),
            "low_freq_factor": float(shape["rope_low_freq_factor"]),
            "high_freq_factor": float(shape["rope_high_freq_factor"]),
            "original_max_position_embeddings": int(shape["rope_original_max_positions"])}


def hf_config(info: ckpt.CheckpointInfo, *, ids: dict, max_position_embeddings: int) -> dict:
    """config.json; `ids` = {eos_token_id, pad_token_id, bos_token_id} as the exported tokenizer has them."""
    s = _shape(info)
    arch, model_type = hf_architecture(s)
    base = float(info.manifest["rotary_base"])
    rope = rope_config(s)
    config = {
        "architectures": [arch],
        "model_type": model_type,
        "vocab_size": s["vocab_size"],
        "hidden_size": s["hidden_size"],
        "intermediate_size": s["ffn_hidden_size"],
        "num_hidden_layers": s["num_layers"],
        "num_attention_heads": s["num_attention_heads"],
        "num_key_value_heads": s["num_query_groups"],
        "head_dim": s["head_dim"],
        "hidden_act": "silu",
        "max_position_embeddings": max_position_embeddings,
        "rms_norm_eps": float(s.get("norm_eps", 1e-5)),  # training/model/gpt.py: layernorm_epsilon
        "tie_word_embeddings": bool(s.get("tied_embeddings", True)),
        "attention_dropout": 0.0,
        "rope_theta": base,  # transformers < 5 reads this key and `rope_scaling`
        "rope_scaling": None if rope["rope_type"] == "default" else rope,
        "rope_parameters": {**rope, "rope_theta": base},
        **ids,
        "torch_dtype": "float32",
        "use_cache": True,
    }
    if model_type in ("qwen3", "qwen2"):
        config["use_sliding_window"] = False
    if model_type in ("qwen3", "llama"):
        config["attention_bias"] = False
    if model_type == "llama":
        config["mlp_bias"] = False
    return config


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
    """megatron-core GPTModel state dict (TP=1) -> the HF layout's state dict (see the module docstring)."""
    nq, ng, hd = shape["num_attention_heads"], shape["num_query_groups"], shape["head_dim"]
    h, ffn = shape["hidden_size"], shape["ffn_hidden_size"]
    qk_norm, qkv_bias = shape.get("qk_norm", True), shape.get("qkv_bias", False)

    def take(key: str, *alts: str) -> torch.Tensor:
        for k in (key, *alts):
            if k in state:
                return state[k].float().contiguous()
        raise ManifestError(f"export-hf: the checkpoint has no {key!r} (is it tensor-parallel sharded?)")

    def split_qkv(t: torch.Tensor, prefix: str, suffix: str) -> dict[str, torch.Tensor]:
        # per KV group: its nq/ng query heads, its key head, its value head (rows; a bias is one column)
        per_group = t.reshape(ng, nq // ng + 2, hd, -1)
        parts = {"q_proj": per_group[:, : nq // ng].reshape(nq * hd, -1),
                 "k_proj": per_group[:, nq // ng].reshape(ng * hd, -1),
                 "v_proj": per_group[:, nq // ng + 1].reshape(ng * hd, -1)}
        return {f"{prefix}self_attn.{k}.{suffix}": (v if suffix == "weight" else v[:, 0]).contiguous()
                for k, v in parts.items()}

    out = {"model.embed_tokens.weight": take("embedding.word_embeddings.weight"),
           "model.norm.weight": take("decoder.final_layernorm.weight")}
    if not shape.get("tied_embeddings", True):
        out["lm_head.weight"] = take("output_layer.weight")
    for i in range(shape["num_layers"]):
        m, q = f"decoder.layers.{i}.", f"model.layers.{i}."
        qkv = take(m + "self_attention.linear_qkv.weight")
        if qkv.shape != ((nq + 2 * ng) * hd, h):
            raise ManifestError(f"export-hf: layer {i} linear_qkv is {tuple(qkv.shape)}, expected "
                                f"{((nq + 2 * ng) * hd, h)} for this shape (tensor-parallel shard?)")
        fc1 = take(m + "mlp.linear_fc1.weight")
        out.update(split_qkv(qkv, q, "weight"))
        if qkv_bias:
            out.update(split_qkv(take(m + "self_attention.linear_qkv.bias")[:, None], q, "bias"))
        if qk_norm:
            out[q + "self_attn.q_norm.weight"] = take(m + "self_attention.q_layernorm.weight")
            out[q + "self_attn.k_norm.weight"] = take(m + "self_attention.k_layernorm.weight")
        out.update({
            q + "input_layernorm.weight": take(m + "input_layernorm.weight",
                                               m + "self_attention.linear_qkv.layer_norm_weight"),
            q + "self_attn.o_proj.weight": take(m + "self_attention.linear_proj.weight"),
            q + "post_attention_layernorm.weight": take(m + "pre_mlp_layernorm.weight",
                                                        m + "mlp.linear_fc1.layer_norm_weight"),
            q + "mlp.gate_proj.weight": fc1[:ffn].contiguous(),
            q + "mlp.up_proj.weight": fc1[ffn:].contiguous(),
            q + "mlp.down_proj.weight": take(m + "mlp.linear_fc2.weight"),
        })
    return out


def tokenizer_spec(info: ckpt.CheckpointInfo) -> str:
    """What `training.chat.load_tokenizer` takes for a checkpoint's tokenizer: `bytes` or the verified copy the
    checkpoint carries (not the path its run was configured with, which may be gone or changed since); the
    configured spec only for a checkpoint that records no tokenizer."""
    spec = (info.manifest.get("config") or {}).get("tokenizer")
    if not info.manifest.get("tokenizer") and isinstance(spec, str):
        return spec
    tok = ckpt.checkpoint_tokenizer(info)
    return "bytes" if tok.get("kind") == "bytes" else str(tok["model_file"])


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
    # the project's tokenizers are trained with the project's chat template (training.chat.chat_format)
    config = {"model_max_length": 1 << 30, "clean_up_tokenization_spaces": False, "chat_template": CIDERMILL_JINJA}
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
    elif tok.get("hf_files"):  # a Hugging Face tokenizer kept whole by an import: its files as they are
        folder = Path(tok["model_file"]).parent
        for name in tok["hf_files"]:
            shutil.copyfile(folder / name, out / name)
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


def special_ids(out: Path) -> dict:
    """eos / pad / bos ids of the tokenizer folder `out` as transformers loads it (pad = eos when it has no pad
    token), for config.json and generation_config.json: read back, so they cannot disagree with it."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(out))
    eos = tok.eos_token_id
    return {"eos_token_id": eos, "pad_token_id": tok.pad_token_id if tok.pad_token_id is not None else eos,
            "bos_token_id": tok.bos_token_id}


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
    ids = special_ids(out) if tokenizer else {"eos_token_id": eod_id, "pad_token_id": eod_id, "bos_token_id": None}
    weights = convert_state(_megatron_state(info), _shape(info))
    # tied embeddings: transformers re-ties lm_head to embed_tokens on load, so only one copy is stored
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    max_pos = max_position_embeddings or max(int(ckpt.seq_length_of(info)), 4096)
    (out / "config.json").write_text(json.dumps(hf_config(info, ids=ids, max_position_embeddings=max_pos), indent=2))
    (out / "generation_config.json").write_text(json.dumps({**ids, "do_sample": False}, indent=2))
    (out / "export.json").write_text(json.dumps({
        "checkpoint": str(info.directory.resolve()), "weights_id": wid, "run": info.manifest.get("run"),
        "stage": info.manifest.get("stage"), "step": info.manifest.get("step"),
        "data": info.manifest["data"].get("source_id"), "tokenizer": {k: v for k, v in tok.items()
                                                                       if k != "model_file"},
        "architecture": hf_architecture(_shape(info))[0]}, indent=2))
