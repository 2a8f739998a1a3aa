"""LoRA adapters: swapping two adapters on one running model gives each one's logits as a model with that
adapter merged into its weights; adapter checkpoints round-trip with their manifest; the PEFT export loads
into the HF export with transformers + peft and gives megatron's logits; recovery training lowers the
held-out loss of a 2-bit palettized model."""

from __future__ import annotations

import json

import pytest
import torch

from training import checkpoint as ckpt
from training import parallel
from training.adapters.lora import AdapterHost, LoraConfig, merged_state, new_adapter
from training.adapters.store import base_id, export_peft, load_adapter, save_adapter
from training.trainer import load_model

from .helpers import quiet, tiny_cfg


@pytest.fixture(scope="module")
def trained(byte_root, tmp_path_factory):
    from training.trainer import train

    return train(tiny_cfg(byte_root, tmp_path_factory.mktemp("lora-run"), steps=40), log=quiet).checkpoint


def _random_adapter(model, rank, seed):
    adapter = new_adapter(model, LoraConfig(rank=rank), seed=seed)
    gen = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        for p in adapter.B.values():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.05)  # B = 0 would make every adapter the identity
    return adapter


def _logits(model, tokens):
    with torch.no_grad():
        return model(tokens, torch.arange(tokens.shape[1])[None].expand_as(tokens), None)


def test_swap_two_adapters_gives_each_ones_merged_logits(trained, tmp_path, c4_docs):
    from training.byte_mixture import encode

    parallel.setup(parallel.ParallelConfig())
    model, info = load_model(trained, seq_length=64)
    model.eval()
    base_state = {k: v.detach().clone() for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)}
    tokens = torch.stack([torch.as_tensor(encode(d["text"])[:48].astype("int64")) for d in c4_docs[:3]])
    base_logits = _logits(model, tokens)
    first, second = _random_adapter(model, 8, 1), _random_adapter(model, 16, 2)

    references = []
    for adapter in (first, second):
        merged, _ = load_model(trained, seq_length=64)
        ckpt.load_state_dict_(merged, merged_state(base_state, adapter))
        references.append(_logits(merged.eval(), tokens))
    assert float((references[0] - references[1]).abs().max()) > 1e-2  # the two adapters do differ

    host = AdapterHost(model)
    for _ in range(2):  # attach, swap, swap back: the same model object throughout
        for adapter, ref in zip((first, second), references):
            host.attach(adapter)
            torch.testing.assert_close(_logits(model, tokens), ref, atol=2e-5, rtol=1e-5)
    host.detach()
    assert torch.equal(_logits(model, tokens), base_logits)  # unloading restores the base bit for bit
    assert all(torch.equal(v, base_state[k]) for k, v in model.state_dict().items() if k in base_state)

    # adapter-only checkpoint: manifest, round trip, wrong base refused
    base = base_id(info.directory)
    path = save_adapter(tmp_path / "a2", second, base=base, extra={"steps": 0})
    manifest = json.loads((path / "adapter.json").read_text())
    assert manifest["rank"] == 16 and manifest["base"] == base and len(manifest["modules"]) == 8
    assert set(manifest["targets"]) == {"linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"}
    loaded = load_adapter(path, expect_base=base)
    host.attach(loaded)
    torch.testing.assert_close(_logits(model, tokens), references[1], atol=2e-5, rtol=1e-5)
    host.detach()
    from manifests.errors import ManifestError

    with pytest.raises(ManifestError, match="trained on base"):
        load_adapter(path, expect_base="other#sha256:0")


def test_peft_export_loads_into_hf_export_with_megatron_logits(trained, tmp_path, c4_docs):
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    from training.byte_mixture import encode
    from training.export_hf import export_hf

    parallel.setup(parallel.ParallelConfig())
    model, info = load_model(trained, seq_length=64, parallel_output=False)
    model.eval()
    adapter = _random_adapter(model, 8, 5)
    hf_dir = export_hf(trained, tmp_path / "hf")
    peft_dir = export_peft(adapter, info.manifest["model_shape"], hf_dir / "adapters" / "recovery",
                           base_model=str(hf_dir))
    config = json.loads((peft_dir / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 8
    assert set(config["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                             "down_proj"}
    hf = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
    hf = peft.PeftModel.from_pretrained(hf, str(peft_dir)).eval()
    tokens = torch.as_tensor(encode(c4_docs[7]["text"])[:40].astype("int64"))[None]
    host = AdapterHost(model)
    host.attach(adapter)
    ours = _logits(model, tokens)
    with torch.no_grad():
        theirs = hf(input_ids=tokens).logits
    assert float((ours - theirs).abs().max()) <= 1e-4
    # and the adapter matters: without it the logits differ
    host.detach()
    assert float((_logits(model, tokens) - theirs).abs().max()) > 1e-3


def test_recovery_lora_lowers_quantized_heldout_loss(trained, tmp_path):
    from training.adapters.recovery import RecoveryConfig, train_batches, train_recovery
    from training.quantize.evalset import eval_set, mean_loss
    from training.quantize.palettize import palettize_state

    parallel.setup(parallel.ParallelConfig())
    model, info = load_model(trained, seq_length=64)
    state = {k: v.detach().clone() for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)}
    layers = [k for k in state if ".linear_" in k]
    q = palettize_state(state, {k: 2 for k in layers}, group_size=16)
    ckpt.load_state_dict_(model, q.state)
    data = eval_set(info, cache_dir=tmp_path / "c", valid_samples=32)
    quant = mean_loss(model, data.valid)
    batches = train_batches(info.manifest, n=160, batch=16, cache_dir=tmp_path / "c2")
    adapter, host, losses = train_recovery(model, batches, RecoveryConfig(lora=LoraConfig(rank=8), steps=20),
                                           log=None)
    assert mean_loss(model, data.valid) < quant - 0.005
    assert all(not p.requires_grad for p in model.parameters())  # the base stayed frozen
    host.detach()
    assert mean_loss(model, data.valid) == pytest.approx(quant, abs=1e-6)
    # a feature adapter initialised from the recovery adapter: starts at its values, trains a copy
    before = {k: v.detach().clone() for k, v in adapter.A.items()}
    feature, host2, _ = train_recovery(model, batches[:2], RecoveryConfig(steps=2), init_from=adapter, log=None)
    host2.detach()
    assert all(torch.equal(adapter.A[k], before[k]) for k in before)  # the recovery adapter is untouched
    assert any(not torch.equal(feature.A[k], before[k]) for k in before)
    assert feature.config == adapter.config
    # svd init: before any step the adapted weights are W_hat + best rank-r approximation of W - W_hat
    from training.adapters.lora import new_adapter

    residual = {k: state[k] - q.state[k] for k in layers}
    svd = new_adapter(model, LoraConfig(rank=8, init="svd"), residual=residual)
    for key in svd.A:
        name = key.replace("/", ".") + ".weight"
        u, s, vh = torch.linalg.svd(residual[name])
        best = (u[:, :8] * s[:8]) @ vh[:8]
        torch.testing.assert_close(svd.delta(key).detach(), best, atol=1e-5, rtol=1e-4)


def test_kl_divergences_match_torch_kl_div():
    import torch.nn.functional as F

    from training.losses import kl_divergences

    parallel.setup(parallel.ParallelConfig())
    gen = torch.Generator().manual_seed(0)
    student, teacher = torch.randn(2, 5, 11, generator=gen), torch.randn(2, 5, 11, generator=gen) * 2
    for t in (1.0, 2.5):
        # reference: torch's kl_div(input = log q, target = log p) summed over the vocabulary = KL(p || q)
        ref = F.kl_div(F.log_softmax(student / t, -1), F.log_softmax(teacher / t, -1), log_target=True,
                       reduction="none").sum(-1) * t * t
        torch.testing.assert_close(kl_divergences(student, teacher, temperature=t), ref, atol=1e-6, rtol=1e-5)
    assert float(kl_divergences(teacher, teacher).abs().max()) < 1e-6  # zero when student == teacher


def test_kl_recovery_moves_the_palettized_model_towards_its_float_teacher(trained, tmp_path):
    from training.adapters.recovery import RecoveryConfig, mean_kl, train_batches, train_recovery
    from training.quantize.evalset import eval_set, mean_loss
    from training.quantize.palettize import palettize_state

    parallel.setup(parallel.ParallelConfig())
    model, info = load_model(trained, seq_length=64)
    teacher, _ = load_model(trained, seq_length=64)
    teacher.eval()
    state = {k: v.detach().clone() for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)}
    data = eval_set(info, cache_dir=tmp_path / "c", valid_samples=32)
    batches = train_batches(info.manifest, n=160, batch=16, cache_dir=tmp_path / "c2")
    cfg = RecoveryConfig(lora=LoraConfig(rank=8, init="zero"), steps=3, loss="kl")
    # student == teacher: zero KL on held-out data and at the first step (zero-init adapter); after it, Adam's
    # normalised steps move B off 0 on rounding-level gradients, which stays ~100 times below the 2-bit KL
    assert mean_kl(model, teacher, data.valid) == pytest.approx(0.0, abs=1e-6)
    _, host, same = train_recovery(model, batches, cfg, teacher=teacher, log=None)
    assert abs(same[0]) < 1e-7 and max(abs(x) for x in same) < 1e-5
    host.detach()

    layers = [k for k in state if ".linear_" in k]
    ckpt.load_state_dict_(model, palettize_state(state, {k: 2 for k in layers}, group_size=16).state)
    kl_quant, ce_quant = mean_kl(model, teacher, data.valid), mean_loss(model, data.valid)
    assert kl_quant > 100 * max(abs(x) for x in same)
    adapter, host, losses = train_recovery(model, batches, RecoveryConfig(lora=LoraConfig(rank=8), steps=20,
                                                                          loss="kl"), teacher=teacher, log=None)
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5  # the training KL falls (measured: 4.4x)
    assert mean_kl(model, teacher, data.valid) < 0.5 * kl_quant  # and the held-out KL to the teacher (8.5x)
    assert mean_loss(model, data.valid) < ce_quant  # which brings the held-out CE towards the float model's
    assert all(not p.requires_grad for p in model.parameters())
    assert all(torch.equal(v, state[k]) for k, v in teacher.state_dict().items() if k in state)  # teacher untouched
    host.detach()
    # a KL objective without a teacher is refused before any step
    from manifests.errors import ConfigError

    with pytest.raises(ConfigError, match="--loss kl needs the float teacher"):
        train_recovery(model, batches, RecoveryConfig(steps=1, loss="kl"), log=None)


def test_recovery_config_refuses_bad_objectives():
    from manifests.errors import ConfigError
    from training.adapters.recovery import RecoveryConfig

    for kwargs, message in (({"loss": "mse"}, "--loss must be one of ce, kl"),
                            ({"loss": "kl", "kl_temperature": 0.0}, "--kl-temperature must be > 0"),
                            ({"loss": "kl", "ce_weight": 1.2}, "--ce-weight must be <= 1"),
                            ({"loss": "ce", "ce_weight": 0.3}, "apply to --loss kl only")):
        with pytest.raises(ConfigError, match=message):
            RecoveryConfig(**kwargs)
    assert RecoveryConfig(loss="kl", kl_temperature=2.0, ce_weight=0.5).ce_weight == 0.5


def test_kl_teacher_must_be_the_palettized_models_source(tmp_path):
    from manifests.errors import ManifestError
    from training.adapters.recovery import check_teacher

    src, other = tmp_path / "float", tmp_path / "other"
    for d, payload in ((src, b"float weights"), (other, b"other weights")):
        d.mkdir()
        (d / "model.pt").write_bytes(payload)
    manifest = {"source_checkpoint": str(src), "source_base": base_id(src)}
    assert check_teacher("pal", manifest) == src  # default: the manifest's source
    assert check_teacher("pal", manifest, src) == src
    with pytest.raises(ManifestError, match="palettized from .*#sha256:.*holds other weights"):
        check_teacher("pal", manifest, other)
    with pytest.raises(ManifestError, match="not a checkpoint"):
        check_teacher("pal", manifest, tmp_path / "missing")
    (src / "model.pt").write_bytes(b"rewritten")  # the source changed since it was palettized
    with pytest.raises(ManifestError, match="holds other weights"):
        check_teacher("pal", manifest)
    # a manifest from before the hash was recorded: its named directory only
    old = {"source_checkpoint": str(src)}
    assert check_teacher("pal", old) == src
    with pytest.raises(ManifestError, match="no weights hash recorded"):
        check_teacher("pal", old, other)
