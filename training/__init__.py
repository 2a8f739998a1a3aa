"""Megatron-core trainer: AFM model specs, the AFM optimizer, pretraining stages, distillation, pruning.

megatron-core warns at import about optional GPU packages (Apex, Transformer Engine) and, for our
tokenizers whose pad id is the end-of-document id, about pad masking (we never mask pads). Those exact
messages are silenced here; every other warning still shows.
"""

import logging
import warnings

for _message in (
    r"Transformer Engine and Apex are not installed",
    r"Apex is not installed",
    r"full scope is deprecated",
    r"The pad token id in the tokenizer collides",
):
    warnings.filterwarnings("ignore", message=_message)
# "Building a BlendedDataset for a single MegatronDataset" (a one-component mixture) is expected
logging.getLogger("megatron.core.datasets.blended_dataset").setLevel(logging.ERROR)
