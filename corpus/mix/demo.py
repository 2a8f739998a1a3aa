"""`make demo` step: tokenizer -> tokenized versions -> the `demo-core` mixture the trainer's demo reads.

Takes every text dataset the demo pipelines left in the catalog (c4-clean, and web/code/math
versions where those pipelines exist), trains a small SentencePiece BPE tokenizer `demo-bpe` on
them, tokenizes them, and publishes the core mixture `demo-core` (catalog name; its file is
`<root>/demo-core/<id>/mixture.json`). Open it with `MixtureManifest.open(root, "demo-core")`.
"""

from __future__ import annotations

import time

import pyarrow as pa

from manifests import Catalog, DatasetVersion
from manifests.mixture import MixtureManifest, MixtureSpec

TOKENIZER_NAME = "demo-bpe"
MIXTURE_NAME = "demo-core"
VOCAB_SIZE = 4096
SEQ_LENGTH = 256
MAX_VERSION_BYTES = 64 << 20  # keep the demo quick: skip anything bigger
MIN_ROWS = 10  # a handful of documents (a side demo's output) is not a mixture component
# Core-stage shares by kind of data (renormalised over what exists); web takes the rest.
KIND_WEIGHTS = {"code": 0.2, "math": 0.15}


def text_versions(catalog: Catalog) -> list[DatasetVersion]:
    """The newest version of each dataset with a `text` column and at least MIN_ROWS rows (no rejects,
    no artifacts, no version another candidate was derived from)."""
    newest: dict[str, DatasetVersion] = {}
    for entry in catalog.versions():
        v = DatasetVersion(entry.location)
        m = v.manifest
        if m.extra.get("kind") or m.extra.get("rejects_of") or v.name.endswith(".rejects") or m.rows == 0:
            continue
        if "text" not in v.schema.names or not pa.types.is_string(v.schema.field("text").type):
            continue
        if m.bytes > MAX_VERSION_BYTES or m.rows < MIN_ROWS:
            continue
        newest[v.name] = v  # versions() is sorted by creation time: the last one wins
    # A version another candidate was made from (web-filtered -> web after dedup) would count its
    # documents twice: keep only the end of each chain.
    parents = {p for v in newest.values() for p in v.manifest.parents}
    return [newest[n] for n in sorted(newest) if newest[n].version_id not in parents]


def component_name(version_name: str) -> str:
    for kind in KIND_WEIGHTS:
        if kind in version_name:
            return kind
    return "web" if version_name.startswith(("c4", "web", "cc")) else version_name


def run(root: str) -> str:
    from corpus.mix.mixture_build import build_mixture, describe_mixture
    from corpus.mix.tokenizer import TokenizerTrainConfig, train_tokenizer

    start = time.perf_counter()
    catalog = Catalog(root)
    versions = text_versions(catalog)
    if not versions:
        print("mix demo: no text datasets in the catalog; run the demo pipelines first")
        return ""
    print("datasets: " + ", ".join(f"{v.name}@{v.version_id[:12]} ({v.manifest.rows:,} rows)" for v in versions))
    refs = [f"{v.name}@{v.version_id}" for v in versions]
    tok_version = train_tokenizer(catalog, refs, TokenizerTrainConfig(vocab_size=VOCAB_SIZE, sample_docs=5000),
                                  name=TOKENIZER_NAME)
    info = tok_version.manifest.extra["tokenizer"]
    print(f"tokenizer {TOKENIZER_NAME}@{tok_version.version_id[:12]}: {info['vocab_size']:,} pieces "
          f"(split digits, byte fallback, identity normalisation), trained in {info['sample']['seconds']:.1f} s")

    names = [component_name(v.name) for v in versions]
    dupes = {n for n in names if names.count(n) > 1}
    names = [v.name if n in dupes else n for n, v in zip(names, versions)]
    weights = {n: KIND_WEIGHTS[n] for n in names if n in KIND_WEIGHTS}
    rest = [n for n in names if n not in KIND_WEIGHTS]
    share = (1.0 - sum(weights.values())) / len(rest) if rest else 0.0
    weights.update({n: share for n in rest})  # from_dict renormalises when there is no web at all
    spec = MixtureSpec.from_dict({
        "name": MIXTURE_NAME, "stage": "core", "tokenizer": f"{TOKENIZER_NAME}@{tok_version.version_id}",
        "seq_length": SEQ_LENGTH, "token_budget": 1 << 18, "seed": 1234,
        "components": [{"name": n, "dataset": r, "weight": weights[n]} for n, r in zip(names, refs)],
    }, where="mix demo")
    mixture = build_mixture(catalog, spec, publish=False)
    location = mixture.publish(catalog)  # <root>/demo-core/<id>/mixture.json
    reread = MixtureManifest.read(location)  # what the trainer's demo will see
    print(describe_mixture(reread))
    print(f"mixture manifest: {MIXTURE_NAME}@{location.path.rsplit('/', 2)[-2][:12]} at {location.uri}")
    print(f"  megatron --data-path {' '.join(reread.data_path_args())}")
    print(f"mix demo finished in {time.perf_counter() - start:.1f} s")
    return location.uri
