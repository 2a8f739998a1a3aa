"""Training finds a mixture's and its token versions' catalog manifests beside their folders, and inside them
in catalogs of the older layout: an edited token file is refused either way, never trained on unchecked."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pytest

from manifests import Catalog, Manifest, ShardInfo, version_id_of
from manifests.errors import ConfigError
from manifests.manifest import MANIFEST_NAME


def _to_older_layout(root) -> None:
    """Where an older cidermill wrote each manifest: inside its version folder (the same bytes)."""
    for mpath in root.glob(f"*/*.{MANIFEST_NAME}"):
        mpath.rename(mpath.parent / mpath.name.removesuffix("." + MANIFEST_NAME) / MANIFEST_NAME)


@pytest.mark.parametrize("legacy", [False, True], ids=["beside", "inside(older layout)"])
def test_token_files_are_checked_against_their_catalog_manifest(tmp_path, c4_docs, legacy):
    from training.byte_mixture import publish_byte_mixture
    from training.data import blend_from_mixture, blend_from_pairs, verify_inputs

    root = tmp_path / "root"
    texts = [d["text"] for d in c4_docs[:40]]
    publish_byte_mixture(root, name="mix", stage="core", seq_length=64, token_budget=64 * 8,
                         components={"a": (0.5, texts[:20]), "b": (0.5, texts[20:])})
    if legacy:
        _to_older_layout(root)
    [mixture_json] = root.glob("mix/*/mixture.json")
    by_ref = blend_from_mixture("mix", root=str(root))
    by_path = blend_from_mixture(str(mixture_json))
    assert by_path.source_id == by_ref.source_id == f"mix@{mixture_json.parent.name}"  # the catalog id, not a hash
    # a tokenized version as the catalog holds one: `.bin`/`.idx` files in the folder, hashed in the manifest
    cat = Catalog(root)
    staging = cat.staging_dir("tok", "k")
    shards = []
    for fname, payload in (("data.bin", b"\x01\x02\x03\x04"), ("data.idx", b"MMIDIDX\x00")):
        staging.join(fname).write_bytes_atomic(payload)
        shards.append(ShardInfo(path=fname, rows=1, bytes=len(payload), sha256=hashlib.sha256(payload).hexdigest()))
    tok = cat.publish(staging, Manifest(name="tok", version_id=version_id_of([s.sha256 for s in shards]),
                                        shards=shards, schema=pa.schema([]), extra={"kind": "tokens"}))
    if legacy:
        _to_older_layout(root)
    blend = blend_from_pairs([(1.0, tok.directory.join("data").path)], vocab_size=256, eod_id=0)
    said = []
    verify_inputs(blend, stamps=tmp_path / "stamps.json", log=said.append)
    assert said == []  # found in the catalog and checked
    with open(tok.directory.join("data.bin").path, "r+b") as f:
        f.write(b"\x09")
    with pytest.raises(ConfigError, match="the tokenized data changed after publishing"):
        verify_inputs(blend, stamps=tmp_path / "stamps2.json", log=said.append)
