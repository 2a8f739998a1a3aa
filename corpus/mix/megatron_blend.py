"""Build megatron-core's blended GPT training dataset straight from a mixture manifest.

This is what a trainer does with a mixture (training/ may copy these ~40 lines rather than import
corpus): the manifest's blend becomes `GPTDatasetConfig.blend`, its sample count the train size.
"""

from __future__ import annotations

import os
from typing import Any

from manifests.mixture import MixtureManifest


class ManifestTokenizer:
    """The few tokenizer facts megatron's GPTDataset reads (ids come pre-tokenized in .bin files)."""

    def __init__(self, info: dict):
        self.vocab_size = int(info["vocab_size"])
        self.eod = int(info["eod_id"])
        self.pad = int(info.get("pad_id", info["eod_id"]))
        # Part of megatron's dataset cache key: a different tokenizer must not reuse cached indices.
        self.unique_identifiers = {"class": "cidermill", "model_sha256": info.get("model_sha256", ""),
                                   "vocab_size": self.vocab_size, "eod": self.eod}


def gpt_dataset_config(mixture: MixtureManifest, *, cache_dir: str | None = None, root: str | None = None, **overrides: Any):
    from megatron.core.datasets.gpt_dataset import GPTDatasetConfig

    if cache_dir:  # megatron then asks torch.distributed for the rank: the trainer initialises it
        os.makedirs(cache_dir, exist_ok=True)
    prefixes, weights = mixture.megatron_blend(root)
    options = dict(
        random_seed=mixture.seed,
        sequence_length=mixture.seq_length,
        blend=(prefixes, weights),
        split="1,0,0",  # the mixture is the training stream; evaluation data comes from elsewhere
        path_to_cache=cache_dir,
        tokenizer=ManifestTokenizer(mixture.tokenizer),
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
        mid_level_dataset_surplus=0.005,
    )
    options.update(overrides)
    return GPTDatasetConfig(**options)


def build_train_dataset(mixture: MixtureManifest, *, cache_dir: str | None = None, num_samples: int | None = None,
                        root: str | None = None, **overrides: Any):
    """The blended training dataset (megatron's `BlendedDataset`) of `num_samples` sequences
    (default: the mixture's budget / seq_length)."""
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset

    config = gpt_dataset_config(mixture, cache_dir=cache_dir, root=root, **overrides)
    n = num_samples if num_samples is not None else mixture.num_samples
    # With a weighted blend megatron wants explicit zeros (not None) for the unused splits.
    train, _, _ = BlendedMegatronDatasetBuilder(GPTDataset, [n, 0, 0], lambda: True, config).build()
    return train
