"""Keyed manifest digests: an HMAC-SHA256 over a manifest's fields, with a key only its owners hold.

`manifest_sha256` finds accidental damage and careless edits, but anyone who edits a manifest can
recompute it: it has no key. With a key configured (`CIDERMILL_MANIFEST_KEY`, the key itself, or
`CIDERMILL_MANIFEST_KEY_FILE`, a file holding it), every manifest published carries
`manifest_hmac_sha256` and `manifest_key_id` (the first 16 hex digits of a hash of the key, to say
which key, not the key), and every manifest read must carry a valid one from that key: an edit,
even with a recomputed sha256, and a stripped signature are both refused. Without a key nothing is
signed or checked (a signed manifest still reads, by its sha256 digest alone). Versions published
before the key was set are signed with `cidermill data sign REF`, which first verifies every shard.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from .errors import ConfigError, ManifestError

KEY_ENV = "CIDERMILL_MANIFEST_KEY"
KEY_FILE_ENV = "CIDERMILL_MANIFEST_KEY_FILE"
HMAC_FIELD = "manifest_hmac_sha256"
KEY_ID_FIELD = "manifest_key_id"


def manifest_key() -> bytes | None:
    """The configured key, or None. A key file that cannot be read, or an empty key, is a ConfigError:
    running unsigned because a path was mistyped would defeat the point."""
    path = os.environ.get(KEY_FILE_ENV)
    if path:
        try:
            with open(path, "rb") as f:
                key = f.read().strip()
        except OSError as exc:
            raise ConfigError(f"{KEY_FILE_ENV}={path}: cannot read the manifest key ({exc.strerror})") from None
        what = f"{KEY_FILE_ENV}={path}"
    elif KEY_ENV in os.environ:
        key, what = os.environ[KEY_ENV].encode(), KEY_ENV
    else:
        return None
    if len(key) < 16:
        raise ConfigError(f"{what}: the manifest key has {len(key)} bytes; use at least 16 (e.g. `openssl rand -hex 32`)")
    return key


def key_id(key: bytes) -> str:
    return hashlib.sha256(b"cidermill-manifest-key\n" + key).hexdigest()[:16]


def signature(key: bytes, body: bytes) -> str:
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def check(d: dict, body: bytes, key: bytes, *, where: str) -> None:
    """Refuse a manifest without a valid signature from `key`. `body` is the canonical JSON of every
    field but the digest and the signature."""
    if HMAC_FIELD not in d:
        raise ManifestError(f"{where}: not signed, but a manifest key is set ({KEY_ENV}/{KEY_FILE_ENV}); sign a "
                            "version you trust with `cidermill data sign REF`")
    if d.get(KEY_ID_FIELD) != key_id(key):
        raise ManifestError(f"{where}: signed with another key (key id {str(d.get(KEY_ID_FIELD))[:16]}, the key "
                            f"set here is {key_id(key)})")
    stored = d[HMAC_FIELD]
    if not isinstance(stored, str) or not hmac.compare_digest(stored, signature(key, body)):
        raise ManifestError(f"{where}: {HMAC_FIELD} does not match the manifest's fields; the manifest was edited "
                            "after it was signed")
