"""`cidermill mix build`: a mixture file -> checked components -> tokenized versions -> mixture manifest.

Every check runs before any tokenizing: the tokenizer loads, every component's dataset version
exists and has rows, its text column is a string. Then each component is tokenized unless a
tokenization by the same tokenizer is already published, and the manifest is written last.

A component of weight 0 is kept: it is checked, tokenized and listed in the manifest (and in its id), and
the trainer leaves it out of what it reads, saying so (training/data.py `Blend.trained`). One rule on both
sides: weight 0 means "in the mixture, not trained on" (an ablation variant, a component switched off).
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace


from manifests import Catalog, DatasetVersion
from manifests.overrides import apply_overrides, read_yaml
from manifests.errors import ConfigError, ManifestError
from manifests.mixture import ComponentEntry, MixtureManifest, MixtureSpec, TokenizedRef

from corpus.mix.tokenizer.artifact import load_tokenizer, tokenizer_identity
from corpus.mix.tokenizer.base import Tokenizer
from corpus.mix.tokenize_run import KIND, TokenizeConfig, prefix_of, tokenize_version

log = logging.getLogger("cidermill.mixture")


def load_mixture_spec(path: str, overrides: list[str] | None = None) -> MixtureSpec:
    """A mixture YAML, with `--set key=value` overrides applied before validation."""
    data = apply_overrides(read_yaml(path, what="mixture"), overrides or [], where=path)
    return MixtureSpec.from_dict(data, where=path)


def _check_component(catalog: Catalog, spec: MixtureSpec, i: int, tokenizer: Tokenizer) -> DatasetVersion:
    comp = spec.components[i]
    where = f"component {comp.name!r} of {spec.source or spec.name}"
    try:
        version = catalog.resolve(comp.dataset)
    except ManifestError as exc:
        raise ConfigError(f"{where}: dataset version {comp.dataset!r} not found in {catalog.root.uri} ({exc}); "
                          "build it first or fix the ref") from exc
    extra = version.manifest.extra
    if extra.get("kind") == KIND:  # already tokenized: it must be by this tokenizer
        if extra.get("tokenizer", {}).get("model_sha256") != tokenizer.model_sha256:
            raise ConfigError(f"{where}: {version.name} was tokenized by {extra['tokenizer'].get('name')}, "
                              f"not by the mixture's tokenizer {tokenizer.name}")
    elif extra.get("kind"):
        raise ConfigError(f"{where}: {version.name} is a {extra['kind']} artifact, not a dataset")
    elif comp.text_field not in version.schema.names:
        raise ConfigError(f"{where}: {version.name} has no column {comp.text_field!r} "
                          f"(columns: {', '.join(version.schema.names)}); set text_field")
    if version.manifest.rows == 0:
        raise ConfigError(f"{where}: dataset version {version.name}@{version.version_id[:12]} is empty (0 rows); "
                          "drop the component or give it data")
    return version


def build_mixture(catalog: Catalog, spec: MixtureSpec, *, tokenize: TokenizeConfig | None = None,
                  eod_token: str | None = None, publish: bool = True) -> MixtureManifest:
    tokenizer = load_tokenizer(spec.tokenizer, catalog=catalog, eod_token=eod_token)
    versions = [_check_component(catalog, spec, i, tokenizer) for i in range(len(spec.components))]
    comps = []
    for comp, given, version in zip(spec.components, spec.weights_given, versions):
        if version.manifest.extra.get("kind") == KIND:
            tokenized, source = version, version.manifest.extra["source"]
        else:
            cfg = replace(tokenize or TokenizeConfig(), text_field=comp.text_field)
            tokenized = tokenize_version(catalog, version, tokenizer, cfg)
            source = {"name": version.name, "version_id": version.version_id}
        extra = tokenized.manifest.extra
        if extra["tokens"] == 0 or extra["documents"] == 0:
            raise ConfigError(f"component {comp.name!r}: {version.name}@{version.version_id[:12]} holds no text in "
                              f"{comp.text_field!r} (0 tokens); drop the component or fix text_field")
        expected = int(round(comp.weight * spec.token_budget))
        comps.append(ComponentEntry(
            name=comp.name, weight=comp.weight, weight_given=given,
            dataset=dict(source, ref=comp.dataset),
            tokenized=TokenizedRef(name=tokenized.name, version_id=tokenized.version_id,
                                   prefix=prefix_of(catalog, tokenized), dtype=extra["dtype"]),
            documents=extra["documents"], tokens=extra["tokens"], tokens_expected=expected,
            epochs=expected / extra["tokens"],
        ))
        if comp.weight == 0:
            log.warning("component %s: weight 0; listed in the mixture, not trained on", comp.name)
        if expected / extra["tokens"] > 4:
            log.warning("component %s: the budget asks for %.1f epochs of %s; past ~4 repeats, extra data "
                        "helps more than repetition", comp.name, expected / extra["tokens"], version.name)
    manifest = MixtureManifest(
        name=spec.name, stage=spec.stage, seq_length=spec.seq_length, token_budget=spec.token_budget,
        seed=spec.seed, tokenizer=tokenizer_identity(tokenizer), components=comps,
        weights_normalised=spec.weights_normalised, spec=spec.to_dict(),
    )
    if publish:
        manifest.publish(catalog)
    return manifest


def describe_mixture(m: MixtureManifest) -> str:
    """A human summary: blend and per-component token counts."""
    lines = [f"mixture {m.name} (stage {m.stage}): seq_length {m.seq_length:,}, budget {m.token_budget:,} tokens "
             f"= {m.num_samples:,} samples, tokenizer {m.tokenizer.get('name')} "
             f"(vocab {m.tokenizer.get('vocab_size'):,}, eod {m.tokenizer.get('eod_id')})",
             f"  {'component':16} {'weight':>8} {'documents':>10} {'tokens':>14} {'expected':>16} {'epochs':>8}"]
    for c in m.components:
        lines.append(f"  {c.name:16} {c.weight:>8.4f} {c.documents:>10,} {c.tokens:>14,} {c.tokens_expected:>16,} "
                     f"{c.epochs:>8.2f}" + ("  (!)" if not math.isfinite(c.epochs) or c.epochs > 4 else ""))
    lines.append("  blend: " + " ".join(f"{w:.6g} {p}" for w, p in zip(m.weights, [c.tokenized.prefix for c in m.components])))
    return "\n".join(lines)
