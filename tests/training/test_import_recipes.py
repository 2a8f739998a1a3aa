"""An imported model (a small random Llama with an untied output layer and a real BPE tokenizer) through every
recipe, with its shape and tokenizer taken from the checkpoint (`model: {shape: checkpoint}`, `tokenizer:
checkpoint`): SFT -> RM, DPO, MDLOO, iTeC; quantize palettize (calibration text) -> recover; eval model; and a
byte-level import as the online distillation teacher of a tiny student."""

from __future__ import annotations

import gzip
import json

import pytest
import torch

from manifests.errors import ConfigError
from training.checkpoint import open_checkpoint
from training.hf_import import import_hf

from .helpers import quiet, tiny_cfg
from .hf_models import make_family

pytestmark = pytest.mark.slow
transformers = pytest.importorskip("transformers")
PREF = "data/samples/preference"
OPTIM = {"name": "adamw", "peak_lr": 1e-3, "warmup_steps": 0, "final_fraction": 1.0, "weight_decay": 0.0}


@pytest.fixture(scope="module")
def imported(tmp_path_factory, c4_docs):
    tmp = tmp_path_factory.mktemp("import-recipes")
    src = make_family("llama-gqa-untied", tmp / "src", [d["text"] for d in c4_docs[:150]])
    return import_hf(src, tmp / "ckpt", log=quiet)


def _post(tmp, name, method, init_from, sources, **extra):
    from training.post_config import from_dict

    raw = {"name": name, "method": method, "model": {"shape": "checkpoint"}, "tokenizer": "checkpoint",
           "init_from": str(init_from), "data": {"sources": sources, "valid_fraction": 0.2},
           "seq_length": 256, "optim": OPTIM, "global_batch": 4, "micro_batch": 2, "steps": 2, "seed": 3,
           "out_dir": str(tmp / name), "log_every": 0, "valid_max": 8, **extra}
    return from_dict(raw, where=name)


def test_post_training_recipes_run_from_an_import(imported, tmp_path):
    from training.dpo import train_dpo
    from training.reward import train_rm
    from training.sft import train_sft

    info = open_checkpoint(imported)
    sft_cfg = _post(tmp_path, "sft", "sft", imported,
                    [{"path": f"{PREF}/llamafactory/kto_en_demo.json.gz", "max_records": 40}])
    assert sft_cfg.model.qk_norm is False and sft_cfg.model.tied_embeddings is False
    assert sft_cfg.rotary_base == info.manifest["rotary_base"]
    assert sft_cfg.tokenizer == str(imported / "tokenizer" / "tokenizer.json")
    sft = train_sft(sft_cfg, log=quiet)
    # the post-trained checkpoint carries the import's whole tokenizer folder (chat template, special tokens)
    from training.checkpoint import verify

    after = open_checkpoint(sft.checkpoint)
    assert verify(after) == [] and after.manifest["tokenizer"]["hf_files"] == info.manifest["tokenizer"]["hf_files"]
    assert sft.evals[-1][1]["loss"] < sft.evals[0][1]["loss"] < 10  # real tokens (vocab ~400): ~log(400) at start
    pairs = [{"path": f"{PREF}/llamafactory/dpo_en_demo.json.gz", "format": "llamafactory", "max_records": 30}]
    rm = train_rm(_post(tmp_path, "rm", "rm", sft.checkpoint, pairs), log=quiet)
    dpo = train_dpo(_post(tmp_path, "dpo", "dpo", sft.checkpoint, pairs, dpo={"loss": "ipo", "beta": 0.5}), log=quiet)
    for ckpt in (rm.checkpoint, dpo.checkpoint):
        m = open_checkpoint(ckpt).manifest
        # `tokenizer: checkpoint` is the copy the SFT checkpoint carries (the same file as the import's)
        assert m["model_shape"]["tied_embeddings"] is False
        assert m["config"]["tokenizer"] == str(sft.checkpoint / "tokenizer" / "tokenizer.json")
        assert m["tokenizer"]["model_sha256"] == info.manifest["tokenizer"]["model_sha256"]

    # an AFM-shape config on this checkpoint is refused before it trains another function
    from training.post_config import from_dict
    from training.post_loop import build_gpt

    sizes = {k: info.manifest["model_shape"][k] for k in ("hidden_size", "num_layers", "num_attention_heads",
                                                          "num_query_groups", "head_dim", "ffn_hidden_size",
                                                          "vocab_size")}
    wrong = from_dict({"name": "w", "method": "sft", "model": {"shape": "tiny", **sizes},
                       "data": {"sources": [{"path": "unused.jsonl"}]}}, where="wrong")
    with pytest.raises(ConfigError, match="qk_norm, tied_embeddings"):
        build_gpt(wrong, init_from=str(imported))

    # MDLOO on addition prompts from the SFT checkpoint (its reference)
    from training.mdloo_config import from_raw
    from training.rl_loop import train_mdloo

    raw = {"name": "rl", "method": "mdloo", "model": {"shape": "checkpoint"}, "tokenizer": "checkpoint",
           "init_from": str(sft.checkpoint), "steps": 1, "seed": 3, "out_dir": str(tmp_path / "rl"), "log_every": 0,
           "data": {"sources": [{"path": "data/samples/rl/addition-prompts.jsonl", "max_records": 40}],
                    "valid_fraction": 0.2},
           "global_batch": 8, "micro_batch": 8, "seq_length": 96, "optim": OPTIM,
           "mdloo": {"prompts_per_iteration": 2, "responses_per_prompt": 4, "inner_steps": 1,
                     "max_new_tokens": 4, "eval_prompts": 4}}
    rl = train_mdloo(from_raw(raw, where="rl"), log=quiet)
    assert open_checkpoint(rl.checkpoint).manifest["model_shape"]["qk_norm"] is False

    # iTeC: the SFT checkpoint as the committee, one round, an SFT refresh
    from manifests.catalog import Catalog
    from training.itec import run_itec
    from training.itec_config import from_dict as itec_config

    cfg = itec_config({
        "name": "imp", "root": str(tmp_path / "root"), "out_dir": str(tmp_path / "itec"),
        "prompts": [{"kind": "gsm8k", "path": "data/samples/gsm8k/train_short64.jsonl", "limit": 3}],
        "committee": [{"name": "sft", "checkpoint": str(sft.checkpoint)}], "samples_per_member": 2,
        "generation": {"max_new_tokens": 6, "temperature": 1.0, "top_p": 1.0, "seed": 3, "max_prompt_tokens": 250},
        "rewards": {"weights": {"math": {"math": 1.0}}}, "rounds": 1, "refresh": [{"method": "sft", "steps": 1}],
        "train": {"seq_length": 256, "micro_batch": 2, "global_batch": 2, "valid_fraction": 0.3},
    })
    result = run_itec(cfg, log=quiet)
    assert len(Catalog(cfg.root).resolve(result.rounds[0].version).read()) == 3 * 2


def test_palettize_recover_and_evaluate_an_import(imported, tmp_path, c4_docs):
    from evals.model.backends import MegatronLM
    from manifests.main import main
    from training.adapters.store import base_id

    text = tmp_path / "calib.jsonl.gz"
    with gzip.open(text, "wt") as f:
        for d in c4_docs[150:230]:
            f.write(json.dumps({"text": d["text"]}) + "\n")
    pal, ad = tmp_path / "pal", tmp_path / "ad"
    # group size 16 divides every row count of this shape, the untied output layer goes int8 like the embedding
    assert main(["quantize", "palettize", str(imported), "--bpw", "3.0", "--calib-text", str(text),
                 "--seq-length", "128", "--calib-samples", "4", "--out", str(pal)]) == 0
    manifest = json.loads((pal / "manifest.json").read_text())
    assert manifest["layers"]["output_layer.weight"]["format"] == "int8-per-row"
    assert manifest["data"]["text_file"] == str(text.resolve()) and manifest["bpw_palettized"] <= 3.0
    assert main(["quantize", "recover", str(pal), "--rank", "4", "--steps", "2", "--batch", "4", "--out", str(ad)]) == 0
    assert json.loads((ad / "adapter.json").read_text())["base"] == base_id(pal)

    lm = MegatronLM(imported, max_length=256)
    (ll, _), = lm.loglikelihood([("The capital of France is", " Paris")])
    assert ll < 0
    assert isinstance(lm.generate(["Once upon a time"], max_new_tokens=4)[0], str)
    assert main(["eval", "model", str(imported), "--tasks", "arc_easy", "--limit", "4", "--data-dir",
                 "data/samples/eval_benchmarks/benchmarks", "--out", str(tmp_path / "eval")]) == 0


def test_byte_level_import_as_distillation_teacher(byte_root, tmp_path):
    """A Llama with a byte-level tokenizer (id == UTF-8 byte, 256 symbols + <|endoftext|>) imported and used
    as the online teacher of a tiny student on the byte mixture."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    from training.config import DistillConfig, with_
    from training.trainer import train

    src = tmp_path / "byte-llama"
    symbol = bytes_to_unicode()
    tok = Tokenizer(models.BPE(vocab={symbol[b]: b for b in range(256)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    fast.save_pretrained(str(src))
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=257, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(str(src))
    teacher = import_hf(src, tmp_path / "teacher", log=quiet)
    assert open_checkpoint(teacher).manifest["tokenizer"]["eod_id"] == 256

    cfg = tiny_cfg(byte_root, tmp_path / "student", steps=3)
    cfg = with_(cfg, model=cfg.model.with_(vocab_size=257),
                distill=DistillConfig(teacher=str(teacher), teacher_weight=0.5))
    result = train(cfg, log=quiet)
    assert len(result.losses) == 3 and all(torch.isfinite(torch.tensor(result.losses)))
