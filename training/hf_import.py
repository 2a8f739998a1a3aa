"""`cidermill train import-hf SRC --out CKPT`: a released model as one of our megatron checkpoints.

SRC is a transformers model folder (config.json, *.safetensors, tokenizer files) or a GGUF file. Supported:
the Llama family (`llama`, `mistral` without a sliding window: Llama 2/3, SmolLM2, Mistral-style) and
Qwen2 / Qwen3 (`qwen2`: biases on q/k/v; `qwen3`: RMSNorm on queries and keys), with grouped-query
attention, tied or untied embeddings, the config's RMSNorm eps, and RoPE unscaled, `linear` or `llama3`.
Anything else (another model type, a sliding window, biases elsewhere, dynamic/YaRN RoPE) is refused with
the reason, before any weight is read.

Weights (HF -> megatron-core local spec; the inverse of training/export_hf.convert_state):
    model.embed_tokens.weight                         -> embedding.word_embeddings.weight
    q_proj / k_proj / v_proj (.weight, .bias)         -> linear_qkv: per KV group, its query heads, its key
                                                         head, its value head (rows; biases likewise)
    q_norm / k_norm                                   -> q_layernorm / k_layernorm
    o_proj -> linear_proj; gate_proj, up_proj -> linear_fc1 = [gate; up]; down_proj -> linear_fc2
    input_layernorm -> input_layernorm; post_attention_layernorm -> pre_mlp_layernorm; model.norm -> final
    lm_head.weight (untied only)                      -> output_layer.weight
Weights are stored in fp32 whatever the source dtype. A GGUF file is dequantised by transformers (its
`gguf_file=` loader, which also undoes llama.cpp's q/k row permutation); the dequantised weights are then
the model's float reference (a Q4_1 file gives the Q4_1 model in fp32, not the original bf16 one).

The checkpoint (training/checkpoint.py format) carries the tokenizer: the source's Hugging Face tokenizer
saved whole under `tokenizer/` (tokenizer.json, tokenizer_config.json, chat template), recorded in the
manifest's `tokenizer` entry with each file's sha256; the project reads `tokenizer.json` with its own
HFTokenizer (corpus.mix.tokenizer), and `export-hf` writes the files back as they are. The manifest's
`source` names the input (path, kind, sha256 of the GGUF file or of every file of the folder, the config).
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from dataclasses import asdict
from pathlib import Path

import torch

from manifests.errors import ConfigError, ManifestError

from .model.shapes import ModelShape

SUPPORTED = ("llama", "mistral", "qwen2", "qwen3")
# tie_word_embeddings when config.json does not say: the transformers classes' own defaults for these types
TIED_DEFAULT = {"llama": False, "mistral": False, "qwen2": False, "qwen3": False}


# ---- the config -> a ModelShape and a RoPE base --------------------------------------------------------
def _rope(cfg: dict, where: str) -> tuple[float, dict]:
    """(rope_theta, scaling fields of ModelShape) from either spelling: transformers 4's `rope_theta` +
    `rope_scaling`, or transformers 5's `rope_parameters`."""
    params = dict(cfg.get("rope_parameters") or {})
    scaling = dict(cfg.get("rope_scaling") or {})
    theta = params.get("rope_theta", cfg.get("rope_theta", 10000.0))
    source = scaling or params
    kind = source.get("rope_type", source.get("type", "default")) or "default"
    if kind == "default":
        return float(theta), {}
    if kind == "linear":
        return float(theta), {"rope_scaling": "linear", "rope_factor": float(source["factor"])}
    if kind == "llama3":
        return float(theta), {"rope_scaling": "llama3", "rope_factor": float(source["factor"]),
                              "rope_low_freq_factor": float(source.get("low_freq_factor", 1.0)),
                              "rope_high_freq_factor": float(source.get("high_freq_factor", 4.0)),
                              "rope_original_max_positions": int(source["original_max_position_embeddings"])}
    raise ConfigError(f"{where}: RoPE scaling {kind!r} is not supported (supported: none, linear, llama3)")


def shape_from_config(cfg: dict, *, name: str, where: str = "config.json") -> tuple[ModelShape, float]:
    """(shape, rotary_base) of a transformers config dict, or a ConfigError naming what is not supported."""
    model_type = cfg.get("model_type")
    if model_type not in SUPPORTED:
        raise ConfigError(f"{where}: model_type {model_type!r} is not supported; import-hf reads "
                          f"{', '.join(SUPPORTED)}")
    if cfg.get("hidden_act", "silu") != "silu":
        raise ConfigError(f"{where}: hidden_act {cfg['hidden_act']!r}; only SwiGLU (silu) MLPs are supported")
    if model_type in ("llama", "mistral") and (cfg.get("attention_bias") or cfg.get("mlp_bias")):
        raise ConfigError(f"{where}: attention_bias/mlp_bias put biases on the output projection or the MLP; "
                          "only query/key/value biases (Qwen2) are supported")
    if model_type == "qwen3" and cfg.get("attention_bias"):
        raise ConfigError(f"{where}: Qwen3 attention_bias adds an output-projection bias; not supported")
    if cfg.get("sliding_window") and (model_type == "mistral" or cfg.get("use_sliding_window")):
        raise ConfigError(f"{where}: sliding-window attention (window {cfg['sliding_window']}) is not supported; "
                          "the megatron model attends to every earlier position")
    heads = int(cfg["num_attention_heads"])
    hidden = int(cfg["hidden_size"])
    theta, rope = _rope(cfg, where)
    shape = ModelShape(
        name=name, hidden_size=hidden, num_layers=int(cfg["num_hidden_layers"]), num_attention_heads=heads,
        num_query_groups=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or hidden // heads), ffn_hidden_size=int(cfg["intermediate_size"]),
        vocab_size=int(cfg["vocab_size"]), qk_norm=model_type == "qwen3", qkv_bias=model_type == "qwen2",
        tied_embeddings=bool(cfg.get("tie_word_embeddings", TIED_DEFAULT[model_type])),
        # a GGUF stores eps as float32 (1e-5 -> 9.99999975e-06): the shortest decimal with that float32 value
        norm_eps=float(f"{float(cfg.get('rms_norm_eps', 1e-6)):.7g}"), **rope)
    return shape, theta


# ---- HF state dict -> megatron state dict ----------------------------------------------------------------
def megatron_state(hf: dict[str, torch.Tensor], shape: ModelShape) -> dict[str, torch.Tensor]:
    """A transformers Llama/Qwen2/Qwen3 state dict -> megatron-core GPTModel (local spec, TP=1), fp32."""
    nq, ng, hd = shape.num_attention_heads, shape.num_query_groups, shape.head_dim
    used: set[str] = set()

    def take(key: str) -> torch.Tensor:
        if key not in hf:
            raise ManifestError(f"import-hf: the source has no tensor {key!r}")
        used.add(key)
        return hf[key].float().contiguous()

    def fuse_qkv(prefix: str, suffix: str) -> torch.Tensor:
        q, k, v = (take(f"{prefix}self_attn.{p}_proj.{suffix}") for p in "qkv")
        cols = q.shape[1:]  # (h,) for weights, () for biases
        q = q.reshape(ng, nq // ng, hd, *cols)
        k, v = k.reshape(ng, 1, hd, *cols), v.reshape(ng, 1, hd, *cols)
        return torch.cat([q, k, v], dim=1).reshape((nq + 2 * ng) * hd, *cols).contiguous()

    out = {"embedding.word_embeddings.weight": take("model.embed_tokens.weight"),
           "decoder.final_layernorm.weight": take("model.norm.weight")}
    if not shape.tied_embeddings:
        out["output_layer.weight"] = take("lm_head.weight")
    elif "lm_head.weight" in hf:  # a tied model may still store the copy; it must be the embedding
        if not torch.equal(hf["lm_head.weight"].float(), out["embedding.word_embeddings.weight"]):
            raise ManifestError("import-hf: tie_word_embeddings is true but lm_head.weight differs from the "
                                "input embedding")
        used.add("lm_head.weight")
    for i in range(shape.num_layers):
        h, m = f"model.layers.{i}.", f"decoder.layers.{i}."
        out[m + "self_attention.linear_qkv.weight"] = fuse_qkv(h, "weight")
        if shape.qkv_bias:
            out[m + "self_attention.linear_qkv.bias"] = fuse_qkv(h, "bias")
        if shape.qk_norm:
            out[m + "self_attention.q_layernorm.weight"] = take(h + "self_attn.q_norm.weight")
            out[m + "self_attention.k_layernorm.weight"] = take(h + "self_attn.k_norm.weight")
        out[m + "self_attention.linear_proj.weight"] = take(h + "self_attn.o_proj.weight")
        out[m + "input_layernorm.weight"] = take(h + "input_layernorm.weight")
        out[m + "pre_mlp_layernorm.weight"] = take(h + "post_attention_layernorm.weight")
        out[m + "mlp.linear_fc1.weight"] = torch.cat([take(h + "mlp.gate_proj.weight"),
                                                      take(h + "mlp.up_proj.weight")]).contiguous()
        out[m + "mlp.linear_fc2.weight"] = take(h + "mlp.down_proj.weight")
    left = sorted(k for k in hf if k not in used and not k.endswith("rotary_emb.inv_freq"))
    if left:  # a tensor we would silently drop means a layout we do not understand
        raise ManifestError(f"import-hf: {len(left)} source tensors have no place in the model, e.g. {left[:3]}")
    return out


# ---- reading a source ------------------------------------------------------------------------------------
def _sha256(path: Path) -> str:
    from manifests.storage import Location

    return Location.parse(str(path)).sha256()[0]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-") or "model"


def _read_folder(src: Path) -> tuple[dict, dict, dict]:
    """(config, state dict, source record) of a transformers folder; the state dict from its safetensors."""
    from safetensors.torch import load_file

    if not (src / "config.json").is_file():
        raise ConfigError(f"import-hf: {src} has no config.json; not a transformers model folder")
    files = sorted(src.glob("*.safetensors"))
    if not files:
        raise ConfigError(f"import-hf: {src} has no *.safetensors weights (convert .bin checkpoints first)")
    config = json.loads((src / "config.json").read_text())
    state: dict[str, torch.Tensor] = {}
    for f in files:
        state.update(load_file(str(f)))
    hashes = {p.name: _sha256(p) for p in sorted(src.iterdir()) if p.is_file() and not p.name.startswith(".")}
    whole = hashlib.sha256("".join(f"{k}:{v}\n" for k, v in hashes.items()).encode()).hexdigest()
    record = {"kind": "hf_folder", "path": str(src.resolve()), "sha256": whole, "files": hashes,
              "dtype": str(next(iter(state.values())).dtype).replace("torch.", "")}
    return config, state, record


def _read_gguf(src: Path) -> tuple[Path, dict]:
    """(a safetensors folder of the dequantised model, source record) of a GGUF file. The folder is synth's
    cached conversion (synth.backends.cpu.converted_model_dir: transformers' GGUF loader, keyed by the file's
    sha256), the one place the project turns a GGUF into a model folder."""
    from synth.backends.cpu import converted_model_dir

    folder = converted_model_dir(src)
    record = {"kind": "gguf", "path": str(src.resolve()), "sha256": _sha256(src), "quantization": _gguf_type(src),
              "converted_folder": str(folder),
              "note": "dequantised by transformers; these fp32 weights are the float reference of this checkpoint"}
    return folder, record


def _gguf_type(src: Path) -> str | None:
    """The GGUF file's weight type as llama.cpp names it (e.g. MOSTLY_Q4_1), when the file says."""
    try:
        from gguf import GGUFReader
        from gguf.constants import LlamaFileType

        field = GGUFReader(str(src)).fields.get("general.file_type")
        return LlamaFileType(int(field.parts[-1][0])).name if field is not None else None
    except Exception:  # noqa: BLE001 - provenance only; the weights were read by transformers
        return None


def _save_tokenizer(folder: Path, into: Path) -> None:
    """The folder's tokenizer, loaded and saved by transformers (tokenizer.json, config, chat template)."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(folder))
    except Exception as exc:  # noqa: BLE001 - transformers raises many kinds; the message says which
        raise ConfigError(f"import-hf: cannot load the tokenizer of {folder} ({type(exc).__name__}: {exc})") from None
    tok.save_pretrained(str(into))
    if not (into / "tokenizer.json").is_file():
        raise ConfigError(f"import-hf: the tokenizer of {folder} has no fast (tokenizer.json) form")


def tokenizer_entry(folder: Path, *, name: str) -> dict:
    """The manifest's tokenizer entry for an HF tokenizer folder: the project's HFTokenizer facts (the ids the
    trainer uses), the special tokens transformers declares and every file's sha256 (`hf_files`)."""
    from corpus.mix.tokenizer import tokenizer_from_bytes

    from .checkpoint import tokenizer_entry as checkpoint_entry

    tok = tokenizer_from_bytes((folder / "tokenizer.json").read_bytes(), name=f"{name}/tokenizer.json",
                               kind="hf_tokenizers")
    return checkpoint_entry(tok.describe(), folder / "tokenizer.json")


# ---- the import --------------------------------------------------------------------------------------------
def import_hf(src: str | Path, out: str | Path, *, name: str | None = None, log=print) -> Path:
    """Write the checkpoint `out` from `src` (folder or .gguf); returns `out`."""
    from . import checkpoint as ckpt
    from . import parallel
    from .model import build_model

    src = Path(src)
    if not src.exists():
        raise ConfigError(f"import-hf: {src} does not exist")
    is_gguf = src.is_file() and src.suffix == ".gguf"
    if not (is_gguf or src.is_dir()):
        raise ConfigError(f"import-hf: {src} is neither a model folder nor a .gguf file")
    if not is_gguf:  # refuse an unsupported architecture before reading weights
        shape_from_config(json.loads((src / "config.json").read_text()) if (src / "config.json").is_file() else {},
                          name="probe", where=str(src / "config.json"))
    folder, gguf_record = _read_gguf(src) if is_gguf else (src, None)
    config, hf_state, record = _read_folder(folder)
    record = gguf_record or record
    name = name or "hf-" + _slug(src.stem if is_gguf else src.name)
    shape, rotary_base = shape_from_config(config, name=name, where=str(folder / "config.json"))
    # run configs type the RoPE base as an integer (every released base is one: 1e4, 1e5, 5e5, 1e6)
    rotary_base = int(rotary_base) if float(rotary_base).is_integer() else rotary_base
    state = megatron_state(hf_state, shape)
    max_pos = int(config.get("max_position_embeddings") or 4096)

    parallel.setup(parallel.ParallelConfig())
    model = build_model(shape, seq_length=max_pos, rotary_base=rotary_base)
    ckpt.load_state_dict_(model, state)  # strict: every parameter of the built model comes from the source
    with tempfile.TemporaryDirectory(prefix="import-hf-tok-") as tmp:
        tok_dir = Path(tmp)
        _save_tokenizer(folder, tok_dir)
        entry = tokenizer_entry(tok_dir, name=name)
        manifest = {
            "run": name, "stage": "import", "step": 0, "steps_total": 0, "seed": 0,
            "model_shape": asdict(shape), "rotary_base": rotary_base, "kernels": "local",
            "data": {"source_id": f"import-{record['kind']}-{record['sha256'][:16]}", "seq_length": max_pos,
                     "vocab_size": entry["vocab_size"], "eod_id": entry["eod_id"]},
            "source": {**record, "model_type": config.get("model_type"),
                       "architecture": (config.get("architectures") or [None])[0],
                       "config": {k: v for k, v in config.items() if isinstance(v, (int, float, str, bool, list, dict))
                                  or v is None}},
        }
        ckpt.save(out, model=model, manifest=manifest, tokenizer=(entry, tok_dir / "tokenizer.json"))
    n = sum(p.numel() for p in model.parameters())
    log(f"imported {src} ({record['kind']}, {config.get('model_type')}, {n / 1e6:.1f}M parameters) -> {out}")
    return Path(out)
