"""Mixture ablations: variants, the runner (with the unigram proxy as the short "training"), the
table and the plot, resuming; plus the `cidermill mix` CLI and the demo step end to end."""

from __future__ import annotations

import json
import sys

import pytest

from corpus.mix import ablate
from corpus.mix.mixture_build import build_mixture
from manifests.errors import ConfigError
from manifests.mixture import MixtureManifest, MixtureSpec

PROXY = "{python} -m corpus.mix.unigram_proxy --mixture {mixture} --out {out}"


@pytest.fixture(scope="module")
def base(catalog, tokenizer):
    return build_mixture(catalog, MixtureSpec.from_dict({
        "name": "abl", "stage": "core", "tokenizer": "test-bpe", "seq_length": 128, "token_budget": 500_000,
        "components": [{"name": "web", "dataset": "web", "weight": 0.5}, {"name": "wiki", "dataset": "wiki", "weight": 0.3},
                       {"name": "code", "dataset": "code", "weight": 0.2}]}))


def test_variants_move_one_weight_and_renormalise(base):
    variants = ablate.make_variants(base, 0.5)
    assert [v.name for v in variants] == ["abl"] + [f"abl.abl-{c}-{d}" for c in ("web", "wiki", "code")
                                                   for d in ("plus", "minus")]
    web_plus = variants[1].weights  # web 0.5 * 1.5 = 0.75, others unchanged, then / 1.25
    assert web_plus == pytest.approx({"web": 0.6, "wiki": 0.24, "code": 0.16})
    for v in variants:
        assert sum(v.weights.values()) == pytest.approx(1.0)
    absolute = ablate.make_variants(base, 0.1, absolute=True, components=["code"])
    assert absolute[1].weights["code"] == pytest.approx(0.3 / 1.1)
    with pytest.raises(ConfigError, match="no component"):
        ablate.make_variants(base, 0.5, components=["math"])


def test_variant_mixtures_keep_components_and_scale_expected_tokens(base):
    v = base.with_weights({"web": 0.6, "wiki": 0.24, "code": 0.16}, name="x")
    assert [c.tokenized for c in v.components] == [c.tokenized for c in base.components]
    assert [c.tokens_expected for c in v.components] == [300_000, 120_000, 80_000]


@pytest.mark.slow  # seven proxy runs, each a fresh interpreter
def test_ablation_runs_scores_table_plot_and_resumes(catalog, base, tmp_path):
    variants = ablate.make_variants(base, 0.5)
    results = ablate.run_ablation(catalog, base, variants, PROXY, str(tmp_path))
    assert len(results) == 7 and not any(r.resumed for r in results)
    rows = ablate.ablation_rows(results, lower_is_better=tuple(results[0].scores))
    by = {r["variant"]: r for r in rows}
    # More of a domain fits that domain's held-out text better; less of it, worse.
    for comp in ("web", "wiki", "code"):
        assert by[f"abl.abl-{comp}-plus"][f"gain:nll/{comp}"] > 0
        assert by[f"abl.abl-{comp}-minus"][f"gain:nll/{comp}"] < 0
    assert by["abl"]["gain:nll/mean"] == 0.0
    csv_path, md_path = ablate.write_table(rows, str(tmp_path))
    png = ablate.plot(rows, str(tmp_path / "ablation.png"))
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert "abl.abl-code-minus" in open(md_path).read() and open(csv_path).read().startswith("variant,")
    # every variant is a mixture a trainer can open
    m = MixtureManifest.read(results[1].mixture_path)
    assert m.stage == "ablation" and m.weights == pytest.approx([0.6, 0.24, 0.16])
    again = ablate.run_ablation(catalog, base, variants, PROXY, str(tmp_path))
    assert all(r.resumed for r in again) and [r.scores for r in again] == [r.scores for r in results]


def test_failing_or_silent_commands_stop_with_the_reason(catalog, base, tmp_path):
    from manifests.errors import FatalError

    one = ablate.make_variants(base, 0.5, components=["web"])[:1]
    with pytest.raises(FatalError, match="exit 3"):
        ablate.run_ablation(catalog, base, one, f"{sys.executable} -c 'raise SystemExit(3)'", str(tmp_path / "a"))
    with pytest.raises(FatalError, match="wrote no"):
        ablate.run_ablation(catalog, base, one, f"{sys.executable} -c pass", str(tmp_path / "b"))
    with pytest.raises(ConfigError, match="unknown placeholder"):
        ablate.run_ablation(catalog, base, one, "echo {nonsense}", str(tmp_path / "c"))


def test_cli_build_show_and_ablate(catalog, tokenizer, tmp_path, capsys):
    from manifests.main import main

    root = catalog.root.uri
    yaml_path = tmp_path / "m.yaml"
    yaml_path.write_text("name: cli-mix\nstage: continued\ntokenizer: test-bpe\nseq_length: 64\ntoken_budget: 100K\n"
                         "components:\n  - {name: web, dataset: web, weight: 2}\n  - {name: code, dataset: code, weight: 2}\n")
    assert main(["mix", "--root", root, "build", str(yaml_path)]) == 0
    out = capsys.readouterr().out
    assert "web" in out and "0.5000" in out and "mixture manifest: cli-mix@" in out
    assert main(["mix", "--root", root, "show", "cli-mix", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["weights_normalised"] is True and [c["weight_given"] for c in shown["components"]] == [2.0, 2.0]
    assert main(["mix", "--root", root, "ablate", "cli-mix", "--delta", "0.5", "--components", "code",
                 "--proxy", "unigram", "--out", str(tmp_path / "abl")]) == 0
    assert (tmp_path / "abl" / "ablation.png").exists()
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml_path.read_text().replace("dataset: code", "dataset: missing-version"))
    assert main(["mix", "--root", root, "build", str(bad), "--check"]) == 2
    assert "missing-version" in capsys.readouterr().err


def test_demo_step_publishes_demo_core(tmp_path, catalog):
    from corpus.mix import demo as mix_demo
    from manifests import Catalog

    cat = Catalog(str(tmp_path))
    web = catalog.resolve("web")
    cat.write_table("c4-clean", web.read())
    cat.write_table("code-clean", catalog.resolve("code").read())
    location = mix_demo.run(str(tmp_path))
    m = MixtureManifest.open(str(tmp_path), "demo-core")
    assert location.endswith("mixture.json") and MixtureManifest.read(location) == m
    assert {c.name: c.weight for c in m.components} == pytest.approx({"code": 0.2, "web": 0.8})
    assert m.tokenizer["name"] == "demo-bpe" and m.tokenizer["vocab_size"] == 4096
