"""Mixtures: spec validation, the built manifest, and the done-when check — megatron-core's blended
dataset built from the manifest draws each component within 1% of its weight."""

from __future__ import annotations

import glob
import logging

import numpy as np
import pytest

from corpus.mix.mixture_build import build_mixture, load_mixture_spec
from manifests.errors import ConfigError, ManifestError
from manifests.mixture import MixtureManifest, MixtureSpec

from tests.corpus.mix.conftest import REPO


def spec(**over) -> dict:
    d = {"name": "mix3", "stage": "core", "tokenizer": "test-bpe", "seq_length": 128, "token_budget": "1M",
         "components": [{"name": "web", "dataset": "web", "weight": 0.5},
                        {"name": "wiki", "dataset": "wiki", "weight": 0.3},
                        {"name": "code", "dataset": "code", "weight": 0.2}]}
    d.update(over)
    return d


@pytest.fixture(scope="module")
def mixture(catalog, tokenizer):
    return build_mixture(catalog, MixtureSpec.from_dict(spec()))


def test_weights_not_summing_to_one_are_normalised_with_a_warning(caplog):
    comps = [{"name": "a", "dataset": "x", "weight": 3}, {"name": "b", "dataset": "y", "weight": 1}]
    with caplog.at_level(logging.WARNING, logger="cidermill.mixture"):
        s = MixtureSpec.from_dict(spec(components=comps))
    assert [c.weight for c in s.components] == [0.75, 0.25]
    assert s.weights_normalised and s.weights_given == (3.0, 1.0)
    assert "weights sum to 4, not 1" in caplog.text
    assert MixtureSpec.from_dict(spec()).weights_normalised is False


@pytest.mark.parametrize("change, message", [
    ({"components": []}, "non-empty list"),
    ({"components": [{"name": "a", "dataset": "x", "weight": -1}]}, "must be >= 0"),
    ({"components": [{"name": "a", "dataset": "x", "weight": 0}]}, "weights sum to 0"),
    ({"components": [{"name": "a", "dataset": "x", "weight": 1}, {"name": "a", "dataset": "y", "weight": 1}]},
     "duplicate component name"),
    ({"components": [{"name": "a", "dataset": "x", "wieght": 1}]}, "unknown key"),
    ({"seq_length": 0}, "seq_length"),
    ({"token_budget": "lots"}, "not a count"),
    ({"name": "a/b"}, "plain name"),
])
def test_bad_specs_are_config_errors(change, message):
    with pytest.raises(ConfigError, match=message):
        MixtureSpec.from_dict(spec(**change))


def test_token_counts_parse_with_units():
    s = MixtureSpec.from_dict(spec(token_budget="6.3T", seq_length=4096))
    assert s.token_budget == 6_300_000_000_000


def test_missing_version_and_empty_component_are_errors(catalog, tokenizer):
    bad = spec(components=[{"name": "web", "dataset": "web", "weight": 1}, {"name": "gone", "dataset": "nope", "weight": 1}])
    with pytest.raises(ConfigError, match="component 'gone'.*dataset version 'nope' not found"):
        build_mixture(catalog, MixtureSpec.from_dict(bad), publish=False)
    empty = spec(components=[{"name": "web", "dataset": "web", "weight": 1}, {"name": "e", "dataset": "empty", "weight": 1}])
    with pytest.raises(ConfigError, match="component 'e'.*is empty"):
        build_mixture(catalog, MixtureSpec.from_dict(empty), publish=False)
    with pytest.raises(ConfigError, match="not in the catalog"):
        build_mixture(catalog, MixtureSpec.from_dict(spec(tokenizer="no-tok")), publish=False)


def test_mixture_manifest_holds_the_blend_and_expected_tokens(catalog, mixture):
    m = MixtureManifest.open(catalog, "mix3")
    assert m == mixture
    assert [c.name for c in m.components] == ["web", "wiki", "code"]
    assert m.weights == [0.5, 0.3, 0.2]
    assert m.blend[0::2] == [0.5, 0.3, 0.2]
    for c, prefix in zip(m.components, m.blend[1::2]):
        tok_version = catalog.resolve(c.tokenized.name)
        assert prefix == c.tokenized.prefix == f"{c.tokenized.name}/{c.tokenized.version_id}/tokens"
        assert c.tokens == tok_version.manifest.tokens and c.documents == tok_version.manifest.rows
        assert c.tokens_expected == round(c.weight * 1_000_000)
        assert c.epochs == pytest.approx(c.tokens_expected / c.tokens)
        assert c.dataset["version_id"] == catalog.resolve(c.name).version_id
    assert m.num_samples == 7813 and m.seq_length == 128
    assert m.tokenizer["vocab_size"] == 1024 and m.tokenizer["eod_id"] == 2
    assert m.tokenizer_model_path().endswith("tokenizer.model")
    args = m.data_path_args()
    assert args[0] == "0.5" and args[1] == str(catalog.root.join(m.components[0].tokenized.prefix).uri)
    # the published version: manifest.json carries the same document
    v = catalog.resolve("mix3")
    assert v.manifest.extra["kind"] == "mixture" and v.manifest.extra["mixture"]["blend"] == m.blend
    assert v.verify() == []
    with pytest.raises(ManifestError, match="not a mixture"):
        MixtureManifest.open(catalog, "web")


def test_megatron_blended_dataset_matches_the_weights_within_1_percent(catalog, mixture):
    from corpus.mix.megatron_blend import build_train_dataset
    from corpus.mix.unigram_proxy import read_indexed

    m = MixtureManifest.open(catalog, "mix3")
    train = build_train_dataset(m)
    assert len(train) >= m.num_samples
    shares = np.bincount(train.dataset_index, minlength=3) / len(train.dataset_index)
    assert np.abs(shares - np.array(m.weights)).max() < 0.01, shares
    # and each drawn sample really comes from the component it is attributed to
    streams = [read_indexed(p)[0] for p in m.prefixes()]
    for i in range(0, len(train), max(1, len(train) // 25)):
        sample = train[i]
        tokens = sample["tokens"].numpy()
        owner = int(train.dataset_index[i])
        window = np.lib.stride_tricks.sliding_window_view(streams[owner], 16)
        assert (window == tokens[:16]).all(axis=1).any(), f"sample {i} not found in {m.components[owner].name}"


def test_example_mixture_files_validate():
    files = sorted(glob.glob(str(REPO / "configs" / "mixtures" / "*.yaml")))
    specs = {s.stage: s for s in map(load_mixture_spec, files) if s.name.startswith("afm-")}
    assert {"core", "continued", "context-lengthening"} <= set(specs)
    assert len(files) >= 4  # the three stages + the demo
    assert [specs[k].seq_length for k in ("core", "continued", "context-lengthening")] == [4096, 8192, 32768]
    core, cont = ({c.name: c.weight for c in specs[k].components} for k in ("core", "continued"))
    assert cont["math"] > core["math"] and cont["code"] > core["code"] and cont["web"] < core["web"]
    assert "licensed" in cont and "licensed" not in core
    assert "long-context" in {c.name for c in specs["context-lengthening"].components}
