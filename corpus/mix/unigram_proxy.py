"""A seconds-cheap proxy "training" for mixture ablations when no trainer is at hand: fit a unigram
language model to the mixture (per-component token frequencies, mixed by the mixture's weights) and
score held-out documents of every component (the last `--heldout` fraction of each, never fitted).

    python -m corpus.mix.unigram_proxy --mixture MIXTURE.json --out DIR

writes DIR/scores.json: {"nll/<component>": nats per token, ..., "nll/mean": their mean}. Lower is
better. It captures the first-order trade-off an ablation measures (more of a domain helps that
domain, costs the others) and nothing deeper; use a real proxy model (`cidermill train ...`) for
decisions. Reads `.bin/.idx` with numpy alone (no torch import), per the format megatron documents.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys

import numpy as np

from manifests.mixture import MixtureManifest

from .ablate import open_mixture, write_scores

_HEADER = b"MMIDIDX\x00\x00"
_DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32, 8: np.uint16}


def read_indexed(prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """(all token ids, per-document lengths) of a megatron indexed dataset with one sequence per document."""
    with open(prefix + ".idx", "rb") as f:
        if f.read(9) != _HEADER:
            raise ValueError(f"{prefix}.idx: not a megatron index file")
        (_version,) = struct.unpack("<Q", f.read(8))
        (code,) = struct.unpack("<B", f.read(1))
        (n_seq,) = struct.unpack("<Q", f.read(8))
        (_n_doc,) = struct.unpack("<Q", f.read(8))
        lengths = np.frombuffer(f.read(4 * n_seq), dtype=np.int32)
    tokens = np.fromfile(prefix + ".bin", dtype=_DTYPES[code])
    if int(lengths.sum()) != tokens.size:
        raise ValueError(f"{prefix}: index says {int(lengths.sum())} tokens, .bin holds {tokens.size}")
    return tokens, lengths


def proxy_scores(mixture: MixtureManifest, *, heldout: float = 0.1, smoothing: float = 0.5) -> dict[str, float]:
    vocab = int(mixture.tokenizer["vocab_size"])
    fitted, tests = [], []
    for prefix in mixture.prefixes():
        tokens, lengths = read_indexed(prefix)
        n_test_docs = max(1, int(round(len(lengths) * heldout)))
        cut = int(lengths[: len(lengths) - n_test_docs].sum())
        fitted.append(np.bincount(tokens[:cut], minlength=vocab).astype(np.float64))
        tests.append(tokens[cut:])
    # The mixture's unigram model: each component's (smoothed) distribution, mixed by weight.
    model = np.zeros(vocab)
    for counts, w in zip(fitted, mixture.weights):
        model += w * (counts + smoothing) / (counts.sum() + smoothing * vocab)
    log_p = np.log(model)
    scores = {f"nll/{c.name}": float(-log_p[t].mean()) for c, t in zip(mixture.components, tests)}
    scores["nll/mean"] = float(np.mean(list(scores.values())))
    return scores


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="unigram_proxy", description=__doc__.split("\n\n")[0])
    p.add_argument("--mixture", required=True, help="a mixture.json (in its catalog) or a catalog ref with --root")
    p.add_argument("--root", help="data root, when --mixture is a ref or a file outside the catalog")
    p.add_argument("--out", required=True)
    p.add_argument("--heldout", type=float, default=0.1)
    args = p.parse_args(argv)
    scores = proxy_scores(open_mixture(args.mixture, args.root), heldout=args.heldout)
    write_scores(args.out, scores)
    print(json.dumps(scores, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
