"""Training data: a weighted blend of Megatron indexed datasets (.bin/.idx) -> deterministic batches.

A blend is what a mixture manifest exports: `(weight, prefix)` pairs over tokenized datasets, plus the
tokenizer's vocabulary size and end-of-document id. megatron-core's BlendedMegatronDatasetBuilder turns it
into a train and a held-out split whose sample order is a pure function of (blend, sequence length, seed,
sample counts), so the data position is just the number of samples consumed: resuming at sample k replays
exactly what an uninterrupted run would have seen.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from manifests.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class Blend:
    components: tuple[tuple[float, str], ...]  # (weight, .bin/.idx prefix)
    vocab_size: int
    eod_id: int
    source_id: str = ""  # mixture manifest `name@version_id`, or "" for hand-made blends (then hashed)
    # what a mixture manifest fixes for its stage (None for hand-made blends: the run config says)
    seq_length: int | None = None
    num_samples: int | None = None
    seed: int | None = None

    # the mixture's tokenizer entry ({name, kind, vocab_size, eod_id, model_sha256, ...}) and its model file
    # (checked against model_sha256), or None for a hand-made blend
    tokenizer: dict | None = None
    tokenizer_file: str | None = None

    def __post_init__(self):
        if not self.components:
            raise ConfigError("data blend is empty; give at least one (weight, prefix) pair")
        for weight, prefix in self.components:
            if not (isinstance(weight, (int, float)) and math.isfinite(weight) and weight >= 0):
                raise ConfigError(f"data blend: weight of {prefix} must be a number >= 0; got {weight}")
            for ext in (".bin", ".idx"):
                if not os.path.exists(prefix + ext):
                    raise ConfigError(f"data blend: {prefix}{ext} does not exist (tokenize the dataset first)")
        if not self.trained:
            raise ConfigError("data blend: every weight is 0; give at least one component a weight > 0")
        if not 0 <= self.eod_id < self.vocab_size:
            raise ConfigError(f"data blend: eod_id {self.eod_id} outside the vocabulary (size {self.vocab_size})")

    @property
    def trained(self) -> tuple[tuple[float, str], ...]:
        """The components training reads: weight 0 means "in the mixture, not trained on" (an ablation
        variant, a component switched off); such a component stays in the manifest and the blend id."""
        return tuple((w, p) for w, p in self.components if w > 0)

    @property
    def id(self) -> str:
        if self.source_id:
            return self.source_id
        text = json.dumps([[w, p] for w, p in self.components] + [self.vocab_size, self.eod_id])
        return "blend-" + hashlib.sha256(text.encode()).hexdigest()[:16]

    def megatron_blend(self) -> list[str]:
        """The `w1 p1 w2 p2 ...` list Megatron-LM's --data-path takes."""
        return [str(x) for w, p in self.components for x in (w, p)]


def blend_from_mixture(ref: str, *, root: str | None = None) -> Blend:
    """A published mixture (`demo-core`, `demo-core@3fa2`, under the data root) or a mixture.json path.
    A published mixture is checked against its catalog manifest first (an edited mixture.json would train
    under the old version id); a loose mixture.json is named by its content hash."""
    from manifests.catalog import Catalog
    from manifests.dataset import DatasetVersion
    from manifests.layout import find_manifest
    from manifests.mixture import MixtureManifest
    from manifests.storage import Location

    if ref.endswith(".json") or os.path.isfile(ref):
        path = Path(ref).resolve()
        if find_manifest(Location.parse(str(path.parent))) is not None:
            version = DatasetVersion(str(path.parent))
            version_id = version.version_id
            _require_intact(version)
        else:
            version_id = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        m = MixtureManifest.read(ref, root=root)
    else:
        if root is None:
            raise ConfigError(f"data.mixture {ref!r} is a catalog reference; set data.root (the data root)")
        version = Catalog(root).resolve(ref)
        _require_intact(version)
        m = MixtureManifest.open(root, f"{version.name}@{version.version_id}")
        version_id = version.version_id
    prefixes, weights = m.megatron_blend()
    vocab_size, eod_id = m.tokenizer.get("vocab_size"), m.tokenizer.get("eod_id")
    if vocab_size is None or eod_id is None:
        raise ConfigError(f"mixture {m.name}: its tokenizer entry lacks vocab_size/eod_id; rebuild the mixture")
    tokenizer_file = None if m.tokenizer.get("kind") == "bytes" else m.tokenizer_model_path()
    if tokenizer_file is not None:
        if not os.path.isfile(tokenizer_file):
            raise ConfigError(f"mixture {m.name}: its tokenizer file {tokenizer_file} is missing")
        if hashlib.sha256(Path(tokenizer_file).read_bytes()).hexdigest() != m.tokenizer.get("model_sha256"):
            raise ConfigError(f"mixture {m.name}: tokenizer file {tokenizer_file} does not match the sha256 the "
                              "mixture recorded; the tokenizer changed after the data was tokenized")
    return Blend(components=tuple(zip(weights, prefixes)), vocab_size=int(vocab_size), eod_id=int(eod_id),
                 source_id=f"{m.name}@{version_id}", seq_length=m.seq_length, num_samples=m.num_samples,
                 seed=m.seed, tokenizer=dict(m.tokenizer), tokenizer_file=tokenizer_file)


def _require_intact(version) -> None:
    problems = version.verify()
    if problems:
        raise ConfigError(f"mixture {version.name}@{version.version_id[:12]} does not match its catalog manifest "
                          f"({problems[0].path}: {problems[0].reason}); it was edited after publishing. Build a "
                          "new version with `cidermill mix build` instead of editing one")


def verify_inputs(blend: Blend, *, stamps: str | Path, log=print) -> None:
    """Check every trained component's tokenized files against their catalog version (size and sha256).
    A file once verified is remembered in `stamps` by (path, size, mtime) and not hashed again; components
    outside the catalog (hand-made prefixes) are said to be unverified."""
    from manifests.dataset import DatasetVersion
    from manifests.layout import find_manifest
    from manifests.storage import Location

    stamps = Path(stamps)
    try:
        seen = json.loads(stamps.read_text())
    except (OSError, ValueError):
        seen = {}
    changed = False
    for weight, prefix in blend.trained:
        folder = Path(prefix).parent
        if find_manifest(Location.parse(str(folder))) is None:
            log(f"[data] {prefix}: not a catalog version, so its tokens are not hash-checked")
            continue
        version = DatasetVersion(str(folder))
        stamp = [[s.path, (folder / s.path).stat().st_size if (folder / s.path).exists() else -1,
                  (folder / s.path).stat().st_mtime_ns if (folder / s.path).exists() else -1, s.sha256]
                 for s in version.manifest.shards]
        key = f"{folder.resolve()}@{version.version_id}"
        if seen.get(key) == stamp:
            continue
        problems = version.verify()
        if problems:
            raise ConfigError(f"{version.name}@{version.version_id[:12]} ({prefix}): {problems[0].path} "
                              f"{problems[0].reason}; the tokenized data changed after publishing, not training on it")
        seen[key] = stamp
        changed = True
    if changed:
        stamps.parent.mkdir(parents=True, exist_ok=True)
        tmp = stamps.with_suffix(".tmp")
        tmp.write_text(json.dumps(seen, indent=1))
        os.replace(tmp, stamps)


def blend_from_pairs(pairs, *, vocab_size: int, eod_id: int, source_id: str = "") -> Blend:
    return Blend(components=tuple((float(w), str(p)) for w, p in pairs), vocab_size=vocab_size,
                 eod_id=eod_id, source_id=source_id)


class _TokenizerFacts:
    """What megatron's GPTDataset asks of a tokenizer: sizes and ids, never text."""

    def __init__(self, vocab_size: int, eod_id: int):
        self.vocab_size = vocab_size
        self.eod = eod_id
        self.pad = eod_id
        self.unique_identifiers = OrderedDict(vocab_size=vocab_size, eod=eod_id)


@dataclass
class Splits:
    train: object  # megatron BlendedDataset / GPTDataset, indexable -> dict of tensors
    valid: object


def valid_share_for(data_cfg, blend: Blend) -> float:
    """`valid_fraction` for a DataConfig."""
    return valid_fraction(blend, fraction=data_cfg.valid_fraction, documents=data_cfg.valid_documents,
                          tokens=data_cfg.valid_tokens)


def valid_fraction(blend: Blend, *, fraction: float | None = None, documents: int | None = None,
                   tokens: int | None = None) -> float:
    """The share of every component's documents to hold out: `fraction` as is (default 0.05), or the share
    that makes `documents` documents or `tokens` tokens over all components (from the .idx headers)."""
    if documents is None and tokens is None:
        return 0.05 if fraction is None else fraction
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    n_docs = n_tokens = 0
    for _, prefix in blend.components:
        ds = IndexedDataset(prefix)
        n_docs += len(ds.document_indices) - 1
        n_tokens += int(ds.sequence_lengths.sum())
    share = documents / n_docs if documents is not None else tokens / n_tokens
    if not 0 < share < 1:
        want = f"{documents} documents" if documents is not None else f"{tokens} tokens"
        raise ConfigError(f"blend {blend.id}: a held-out split of {want} is not less than the data "
                          f"({n_docs} documents, {n_tokens} tokens)")
    return share


def build_splits(blend: Blend, *, seq_length: int, seed: int, n_train: int, n_valid: int,
                 cache_dir: str | Path, valid_share: float = 0.05) -> Splits:
    """Train and held-out samples; documents are split (not samples), so held-out text is unseen.
    `valid_share` of each component's documents is held out (see `valid_fraction`)."""
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig

    weights = [w for w, _ in blend.trained]  # a weight-0 component is not read
    prefixes = [p for _, p in blend.trained]
    config = GPTDatasetConfig(
        random_seed=seed,
        sequence_length=seq_length,
        blend=(prefixes, weights),
        # megatron reads the numbers with the pattern [.0-9]+, so no exponent notation
        split=f"{1 - valid_share:.12f},{valid_share:.12f},0",
        path_to_cache=str(cache_dir),
        tokenizer=_TokenizerFacts(blend.vocab_size, blend.eod_id),
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
        create_attention_mask=False,  # the model builds the causal mask itself
        mid_level_dataset_surplus=0.05,
    )
    os.makedirs(cache_dir, exist_ok=True)
    train, valid, _ = BlendedMegatronDatasetBuilder(
        GPTDataset, [n_train, n_valid, 0], lambda: True, config).build()
    if train is None or valid is None:
        raise ConfigError(f"blend {blend.id}: too little data for a train and a {valid_share:.3g} held-out split")
    return Splits(train=train, valid=valid)


def batch_at(dataset, start: int, size: int, *, dp_rank: int = 0, dp_size: int = 1) -> dict[str, torch.Tensor]:
    """Samples [start, start+size) of the global order, this data-parallel rank's contiguous slice.

    Returns tokens, labels, loss_mask, position_ids [B,S] and sample_index [B] (global sample numbers,
    which key precomputed per-sample data such as a teacher's top-1 ids).
    """
    per_rank = size // dp_size
    first = start + dp_rank * per_rank
    n = len(dataset)
    index = [(first + i) % n for i in range(per_rank)]
    samples = [dataset[i] for i in index]
    batch = {k: torch.stack([torch.as_tensor(s[k]) for s in samples])
             for k in ("tokens", "labels", "loss_mask", "position_ids")}
    batch["sample_index"] = torch.tensor(index)
    return batch


def write_indexed(prefix: str | Path, documents, *, dtype=np.int32) -> str:
    """Write token-id documents (iterables of ints) as a Megatron indexed dataset; returns the prefix."""
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    prefix = str(prefix)
    os.makedirs(os.path.dirname(prefix) or ".", exist_ok=True)
    builder = IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)
    for doc in documents:
        # a numpy array, not a tensor: megatron converts it with numpy.array(), which warns on tensors
        builder.add_document(np.asarray(doc, dtype=dtype), [len(doc)])
    builder.finalize(prefix + ".idx")
    return prefix
