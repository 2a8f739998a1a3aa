"""Mixtures: which tokenized dataset versions a training stage reads, with what weights.

Two objects live here, both pyarrow/stdlib only so a trainer can read them without the data engine:

`MixtureSpec` is what a user writes (configs/mixtures/*.yaml, parsed into a dict by the CLI):

    name: afm-core                 # the catalog name the built mixture gets
    stage: core                    # core | continued | context-lengthening | sft | ... (free text)
    tokenizer: afm-bpe-49k         # catalog ref of a tokenizer artifact (or a .model / tokenizer.json path)
    seq_length: 4096
    token_budget: 6.3T             # an int, or a count with K/M/B/T (powers of 1000)
    seed: 1234                     # optional; the seed the trainer gives megatron's dataset builder
    components:
      - {name: web,  dataset: web-clean,     weight: 0.6}
      - {name: code, dataset: code@3fa2b1c9, weight: 0.25, text_field: content}
      - {name: math, dataset: math-web,      weight: 0.15}

Weights must be >= 0 and not all 0; if they do not sum to 1 they are normalised with a warning (the
original weights are kept in the manifest). Names must be unique.

`MixtureManifest` is what `cidermill mix build` writes, a JSON document (`mixture.json`), published as a
catalog version named after the mixture (`<root>/<name>/<id>/mixture.json`; its `<id>.manifest.json` holds
the same document under `extra["mixture"]`, with `extra["kind"] == "mixture"`). Fields:

    schema_version   1 (readers refuse others)
    kind             "mixture"
    name, stage      as in the spec
    seq_length       tokens per training sequence
    token_budget     tokens the stage trains on
    num_samples      ceil(token_budget / seq_length): what to ask megatron's builder for ([N, 0, 0])
    seed             random seed for megatron's dataset builder
    tokenizer        {name, version_id, kind, vocab_size, eod_id, pad_id, model_path, model_sha256}
                     model_path is relative to the data root (null for a tokenizer given by file path:
                     then `model_file` holds its absolute path)
    components       [{name, weight, weight_given, dataset: {name, version_id, ref},
                       tokenized: {name, version_id, prefix, dtype}, documents, tokens,
                       tokens_expected, epochs}]
                     prefix is the Megatron path prefix (`.bin`/`.idx` without suffix) relative to
                     the data root; tokens_expected = weight * token_budget; epochs =
                     tokens_expected / tokens (how often the stage repeats that component)
    blend            [w1, prefix1, w2, prefix2, ...]: Megatron's `--data-path` form, prefixes
                     relative to the data root
    weights_normalised  true when the given weights did not sum to 1
    created_at, spec  the build time and the canonical input spec

To train from one (the trainer's side):

    m = MixtureManifest.open("data/root", "demo-core")        # or MixtureManifest.read(".../mixture.json")
    prefixes, weights = m.megatron_blend()                     # absolute prefixes for the config's `blend`
    GPTDatasetConfig(blend=(prefixes, weights), sequence_length=m.seq_length, random_seed=m.seed, ...)
    BlendedMegatronDatasetBuilder(GPTDataset, [m.num_samples, 0, 0], lambda: True, config).build()
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pyarrow as pa

from .catalog import Catalog
from .config import Count, build_config, require
from .errors import ConfigError, ManifestError
from .layout import find_manifest
from .manifest import Manifest, ShardInfo, canonical_json, version_id_of
from .storage import Location

log = logging.getLogger("cidermill.mixture")

MIXTURE_SCHEMA_VERSION = 1
MIXTURE_FILE = "mixture.json"
# The one list of training stage kinds: the pretraining stages a trainer runs (training/config.py
# checks `stage` against PRETRAIN_STAGES) and the other labels a mixture may carry.
PRETRAIN_STAGES = ("core", "continued", "context-lengthening")
KNOWN_STAGES = PRETRAIN_STAGES + ("sft", "rlhf", "ablation")
# A sum within this distance of 1 is taken as 1 (YAML floats like 0.1 + 0.2).
WEIGHT_SUM_TOLERANCE = 1e-6


@dataclass(frozen=True, kw_only=True)
class ComponentFile:
    """One `components:` entry of a mixture file."""

    name: str
    dataset: str  # catalog ref: name, name@idprefix or idprefix
    weight: float
    text_field: str = "text"

    def __post_init__(self):
        require(math.isfinite(self.weight), f"weight must be a finite number; got {self.weight!r}")
        require(self.weight >= 0, f"weight must be >= 0; got {self.weight}")
        require(bool(self.name) and bool(self.dataset), "name and dataset must be non-empty strings")


@dataclass(frozen=True, kw_only=True)
class MixtureFile:
    """A mixture YAML file, key for key (validated by the one config library)."""

    name: str
    stage: str
    tokenizer: str  # tokenizer artifact ref or tokenizer file path
    seq_length: Count
    token_budget: Count  # 6.3T, 100B, 2M or 4096
    components: list[ComponentFile]
    seed: int = 1234
    notes: Any = None

    def __post_init__(self):
        require(bool(self.name) and "/" not in self.name and "@" not in self.name and not self.name.startswith("."),
                f"name {self.name!r} must be a plain name (no '/', '@', leading '.')")
        require(bool(self.stage), f"stage: give one of {list(KNOWN_STAGES)} (or another label)")
        require(bool(self.tokenizer), "tokenizer: give a tokenizer artifact ref or a tokenizer file path")
        require(self.seq_length > 0, f"seq_length must be > 0; got {self.seq_length}")
        require(self.token_budget >= self.seq_length,
                f"token_budget must be >= seq_length ({self.seq_length}); got {self.token_budget}")
        require(bool(self.components), "components: give a non-empty list of {name, dataset, weight}")
        names = [c.name for c in self.components]
        dupes = sorted({n for n in names if names.count(n) > 1})
        require(not dupes, f"components: duplicate component name(s) {dupes}")
        require(sum(c.weight for c in self.components) > 0,
                "components: weights sum to 0; give at least one weight > 0")


@dataclass(frozen=True)
class MixtureComponent:
    name: str
    dataset: str  # catalog ref: name, name@idprefix or idprefix
    weight: float
    text_field: str = "text"


@dataclass(frozen=True)
class MixtureSpec:
    name: str
    stage: str
    tokenizer: str
    seq_length: int
    token_budget: int
    components: tuple[MixtureComponent, ...]
    seed: int = 1234
    weights_normalised: bool = False
    weights_given: tuple[float, ...] = ()
    source: str = ""  # the file it came from, for error messages

    @classmethod
    def from_dict(cls, d: Any, *, where: str = "mixture") -> "MixtureSpec":
        """Validate a parsed mixture file; raise ConfigError naming the key and the fix."""
        if not isinstance(d, dict):
            raise ConfigError(f"{where}: expected a mapping with name, stage, tokenizer, components, ...")
        f = build_config(MixtureFile, d, where=where)
        if f.stage not in KNOWN_STAGES:
            log.warning("%s: stage %r is not one of %s; keeping it as a label", where, f.stage, KNOWN_STAGES)
        name, stage, seq_length, token_budget, seed = f.name, f.stage, f.seq_length, f.token_budget, f.seed
        components = [MixtureComponent(name=c.name, dataset=c.dataset, weight=c.weight, text_field=c.text_field)
                      for c in f.components]
        total = sum(c.weight for c in components)
        given = tuple(c.weight for c in components)
        normalised = abs(total - 1.0) > WEIGHT_SUM_TOLERANCE
        if normalised:
            log.warning("%s: weights sum to %.6g, not 1; normalising them to %s", where, total,
                        ", ".join(f"{c.name}={c.weight / total:.4f}" for c in components))
        components = [replace(c, weight=c.weight / total) for c in components]
        return cls(
            name=name, stage=stage, tokenizer=f.tokenizer, seq_length=seq_length,
            token_budget=token_budget, components=tuple(components), seed=seed,
            weights_normalised=normalised, weights_given=given, source=where,
        )

    def to_dict(self) -> dict:
        """The canonical spec (normalised weights), as written into the built manifest."""
        return {
            "name": self.name, "stage": self.stage, "tokenizer": self.tokenizer,
            "seq_length": self.seq_length, "token_budget": self.token_budget, "seed": self.seed,
            "components": [asdict(c) for c in self.components],
        }


@dataclass(frozen=True)
class TokenizedRef:
    """A tokenized dataset version: Megatron `.bin/.idx` at `<data root>/<prefix>.{bin,idx}`."""

    name: str
    version_id: str
    prefix: str  # relative to the data root
    dtype: str  # numpy dtype name of the token ids (uint16 below 65,500 ids, else int32)


@dataclass(frozen=True)
class ComponentEntry:
    name: str
    weight: float  # normalised; these are the blend weights
    weight_given: float
    dataset: dict  # {name, version_id, ref}
    tokenized: TokenizedRef
    documents: int
    tokens: int  # tokens available (EOD included)
    tokens_expected: int  # weight * token_budget
    epochs: float  # tokens_expected / tokens


@dataclass
class MixtureManifest:
    name: str
    stage: str
    seq_length: int
    token_budget: int
    seed: int
    tokenizer: dict
    components: list[ComponentEntry]
    weights_normalised: bool = False
    spec: dict = field(default_factory=dict)
    created_at: str = ""
    schema_version: int = MIXTURE_SCHEMA_VERSION
    # Where this manifest was read from: the data root its prefixes are relative to.
    root: Location | None = field(default=None, compare=False, repr=False)

    # ---- derived -------------------------------------------------------------------------
    @property
    def num_samples(self) -> int:
        return math.ceil(self.token_budget / self.seq_length)

    @property
    def weights(self) -> list[float]:
        return [c.weight for c in self.components]

    @property
    def blend(self) -> list:
        """`[w1, prefix1, w2, prefix2, ...]` with prefixes relative to the data root."""
        out: list = []
        for c in self.components:
            out += [c.weight, c.tokenized.prefix]
        return out

    def _root(self, root: Location | str | None) -> Location:
        if root is not None:
            return root if isinstance(root, Location) else Location.parse(root)
        if self.root is None:
            raise ManifestError(f"mixture {self.name}: no data root known; pass root= (the catalog root)")
        return self.root

    def prefixes(self, root: Location | str | None = None) -> list[str]:
        base = self._root(root)
        return [base.join(c.tokenized.prefix).uri for c in self.components]

    def megatron_blend(self, root: Location | str | None = None) -> tuple[list[str], list[float]]:
        """(prefixes, weights) for `BlendedMegatronDatasetConfig.blend`; prefixes are absolute."""
        return self.prefixes(root), self.weights

    def data_path_args(self, root: Location | str | None = None) -> list[str]:
        """Megatron-LM's `--data-path w1 p1 w2 p2 ...` as strings."""
        out = []
        for w, p in zip(self.weights, self.prefixes(root)):
            out += [repr(w), p]
        return out

    def tokenizer_model_path(self, root: Location | str | None = None) -> str | None:
        """Absolute path of the tokenizer model file, if the tokenizer lives in the catalog."""
        if self.tokenizer.get("model_path"):
            return self._root(root).join(self.tokenizer["model_path"]).uri
        return self.tokenizer.get("model_file")

    def with_weights(self, weights: dict[str, float], *, name: str, stage: str | None = None) -> "MixtureManifest":
        """A copy with new weights (renormalised), e.g. an ablation variant; tokens_expected follow."""
        missing = sorted(set(weights) - {c.name for c in self.components})
        if missing:
            raise ConfigError(f"mixture {self.name}: no component(s) {missing}")
        raw = [max(0.0, float(weights.get(c.name, c.weight))) for c in self.components]
        total = sum(raw)
        if total <= 0:
            raise ConfigError(f"mixture {self.name}: new weights sum to 0")
        comps = []
        for c, w in zip(self.components, raw):
            w = w / total
            expected = int(round(w * self.token_budget))
            comps.append(replace(c, weight=w, weight_given=w, tokens_expected=expected,
                                 epochs=expected / c.tokens if c.tokens else math.inf))
        spec = dict(self.spec, name=name, components=[
            dict(sc, weight=c.weight) for sc, c in zip(self.spec.get("components", []), comps)])
        return replace(self, name=name, stage=stage or self.stage, components=comps, spec=spec,
                       weights_normalised=False, created_at="")

    # ---- (de)serialisation ---------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "schema_version": self.schema_version,
            "kind": "mixture",
            "name": self.name,
            "stage": self.stage,
            "seq_length": self.seq_length,
            "token_budget": self.token_budget,
            "num_samples": self.num_samples,
            "seed": self.seed,
            "tokenizer": dict(self.tokenizer),
            "components": [
                {**asdict(c), "tokenized": asdict(c.tokenized)} for c in self.components
            ],
            "blend": self.blend,
            "weights_normalised": self.weights_normalised,
            "created_at": self.created_at,
            "spec": self.spec,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n"

    @classmethod
    def from_dict(cls, d: Any, *, where: str = "mixture manifest", root: Location | None = None) -> "MixtureManifest":
        if not isinstance(d, dict) or d.get("kind") != "mixture":
            raise ManifestError(f"{where}: not a mixture manifest (expected \"kind\": \"mixture\")")
        sv = d.get("schema_version")
        if sv != MIXTURE_SCHEMA_VERSION:
            raise ManifestError(f"{where}: unknown mixture schema_version {sv!r}; this cidermill reads "
                                f"{MIXTURE_SCHEMA_VERSION} (upgrade cidermill to read newer ones)")
        try:
            comps = [
                ComponentEntry(
                    name=c["name"], weight=float(c["weight"]), weight_given=float(c.get("weight_given", c["weight"])),
                    dataset=dict(c["dataset"]), tokenized=TokenizedRef(**c["tokenized"]),
                    documents=int(c["documents"]), tokens=int(c["tokens"]),
                    tokens_expected=int(c["tokens_expected"]), epochs=float(c["epochs"]),
                )
                for c in d["components"]
            ]
            m = cls(
                name=d["name"], stage=d["stage"], seq_length=int(d["seq_length"]),
                token_budget=int(d["token_budget"]), seed=int(d.get("seed", 1234)),
                tokenizer=dict(d["tokenizer"]), components=comps,
                weights_normalised=bool(d.get("weights_normalised", False)), spec=dict(d.get("spec", {})),
                created_at=d.get("created_at", ""), schema_version=sv, root=root,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"{where}: malformed mixture manifest ({type(exc).__name__}: {exc})") from exc
        if not comps:
            raise ManifestError(f"{where}: a mixture with no components")
        if abs(sum(m.weights) - 1.0) > 1e-6:
            raise ManifestError(f"{where}: weights sum to {sum(m.weights):.6g}, not 1; the file was edited")
        for c in comps:
            if os.path.isabs(c.tokenized.prefix) or ".." in c.tokenized.prefix.split("/"):
                raise ManifestError(f"{where}: component {c.name}: prefix {c.tokenized.prefix!r} must be "
                                    "relative to the data root, without '..'")
        return m

    @classmethod
    def read(cls, path: str | Location, *, root: Location | str | None = None) -> "MixtureManifest":
        """Read a `mixture.json`. The data root is `root`, else the catalog the file sits in
        (`<root>/<name>/<id>/mixture.json`)."""
        loc = path if isinstance(path, Location) else Location.parse(path)
        if not loc.exists():
            raise ManifestError(f"{loc.uri}: no such mixture manifest")
        try:
            data = json.loads(loc.read_bytes())
        except json.JSONDecodeError as exc:
            raise ManifestError(f"{loc.uri}: not valid JSON ({exc})") from exc
        version_dir = Location(loc.fs, loc.path.rsplit("/", 1)[0])
        catalog_manifest = find_manifest(version_dir)
        in_catalog = catalog_manifest is not None
        if root is None and in_catalog:
            root = Location(loc.fs, version_dir.path.rsplit("/", 2)[0])
        elif isinstance(root, str):
            root = Location.parse(root)
        m = cls.from_dict(data, where=loc.uri, root=root)
        if in_catalog and not m.created_at:  # the build time lives in the catalog manifest
            m.created_at = json.loads(catalog_manifest.read_bytes()).get("created_at", "")
        return m

    @classmethod
    def open(cls, catalog: Catalog | str | Location, ref: str) -> "MixtureManifest":
        """Open a published mixture by catalog ref (`demo-core`, `demo-core@3fa2`)."""
        cat = catalog if isinstance(catalog, Catalog) else Catalog(catalog)
        version = cat.resolve(ref)
        if version.manifest.extra.get("kind") != "mixture":
            raise ManifestError(f"{ref!r} in {cat.root.uri} is a {version.manifest.extra.get('kind', 'dataset')} "
                                "version, not a mixture (build one with `cidermill mix build`)")
        return cls.read(version.directory.join(MIXTURE_FILE), root=cat.root)

    def publish(self, catalog: Catalog) -> Location:
        """Write this mixture as a catalog version named `self.name`; return its mixture.json."""
        # The content address leaves out the build time (the catalog manifest records it), so
        # building the same mixture twice gives the same version.
        body = dict(self.to_dict(), created_at="")
        data = (json.dumps(body, indent=1, ensure_ascii=False) + "\n").encode()
        sha = hashlib.sha256(data).hexdigest()
        staging = catalog.staging_dir(self.name, sha)
        staging.join(MIXTURE_FILE).write_bytes_atomic(data)
        manifest = Manifest(
            name=self.name,
            version_id=version_id_of([sha]),
            shards=[ShardInfo(path=MIXTURE_FILE, rows=len(self.components), bytes=len(data), sha256=sha,
                              tokens=sum(c.tokens_expected for c in self.components))],
            schema=pa.schema([]),
            parents=[c.tokenized.version_id for c in self.components],
            extra={"kind": "mixture", "mixture": body, "spec_sha256": sha256_of(self.spec)},
        )
        version = catalog.publish(staging, manifest)
        self.root = catalog.root
        self.created_at = version.manifest.created_at
        return version.directory.join(MIXTURE_FILE)


def sha256_of(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()
