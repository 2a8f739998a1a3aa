"""The dataset-version manifest: what a version holds, where it came from, what each stage did.

A version is an immutable directory of Parquet shards plus a manifest beside it (`<id>.manifest.json`,
layout.py), written last. The
version id is a hash over the ordered shard hashes, so the same content always gets the same id,
whoever made it and whenever.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from .errors import ManifestError
from . import signing

# 2: `manifest_sha256` covers every other field, so any edit of a published manifest is found.
# 1: no digest; still read (versions published before digests), and `verify` says it is unprotected.
SCHEMA_VERSION = 2
SUPPORTED_SCHEMA_VERSIONS = frozenset({1, 2})
MANIFEST_NAME = "manifest.json"  # `<id>.manifest.json` beside the version folder; `<id>/manifest.json` before
DIGEST_FIELD = "manifest_sha256"


def canonical_json(obj: Any) -> str:
    """Sorted keys, no whitespace: equal configs give equal strings, hence equal hashes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def config_hash(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()


_HEX64 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,160}")


def manifest_digest(d: dict) -> str:
    """sha256 over the canonical JSON of every manifest field but the digest itself."""
    return config_hash({k: v for k, v in d.items() if k != DIGEST_FIELD})


def _signed_body(d: dict) -> bytes:
    """What the keyed signature covers: every field but the digest and the signature itself."""
    return canonical_json({k: v for k, v in d.items() if k not in (DIGEST_FIELD, signing.HMAC_FIELD)}).encode()


def version_id_of(shard_sha256s: list[str]) -> str:
    """Content address of a version: sha256 over the ordered shard digests."""
    digest = hashlib.sha256(b"cidermill-version-v1\n")
    for sha in shard_sha256s:
        digest.update(sha.encode() + b"\n")
    return digest.hexdigest()


@dataclass(frozen=True)
class ShardInfo:
    path: str  # relative to the version directory
    rows: int
    bytes: int
    sha256: str
    tokens: int | None = None


@dataclass
class StageStats:
    """What one stage did over the whole run: rows in/out, drops by reason, counters, time."""

    name: str
    rows_in: int = 0
    rows_out: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    bytes_in: int = 0  # Arrow bytes of the tables the stage was given / returned (all columns, in memory)
    bytes_out: int = 0

    def merge(self, other: "StageStats") -> None:
        self.rows_in += other.rows_in
        self.rows_out += other.rows_out
        self.bytes_in += other.bytes_in
        self.bytes_out += other.bytes_out
        for reason, n in other.dropped.items():
            self.dropped[reason] = self.dropped.get(reason, 0) + n
        for key, n in other.counters.items():
            self.counters[key] = self.counters.get(key, 0) + n
        self.seconds += other.seconds

    @property
    def n_dropped(self) -> int:
        return sum(self.dropped.values())

    @classmethod
    def from_dict(cls, d: dict) -> "StageStats":
        return cls(
            name=d["name"],
            rows_in=int(d.get("rows_in", 0)),
            rows_out=int(d.get("rows_out", 0)),
            dropped={k: int(v) for k, v in d.get("dropped", {}).items()},
            counters={k: int(v) for k, v in d.get("counters", {}).items()},
            seconds=float(d.get("seconds", 0.0)),
            bytes_in=int(d.get("bytes_in", 0)),
            bytes_out=int(d.get("bytes_out", 0)),
        )


@dataclass(frozen=True)
class PipelineInfo:
    """Which code and configuration produced a version."""

    name: str
    stages: list[dict]  # [{"name": "normalize_text_v1", "config": {...}}]
    config: dict  # the canonical pipeline config (inputs, stages, output settings)
    code_revision: str
    config_sha256: str = ""

    @classmethod
    def from_dict(cls, d: dict) -> "PipelineInfo":
        return cls(
            name=d["name"],
            stages=list(d.get("stages", [])),
            config=dict(d.get("config", {})),
            code_revision=d.get("code_revision", "unknown"),
            config_sha256=d.get("config_sha256", ""),
        )


def schema_to_b64(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def schema_from_b64(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


@dataclass
class Manifest:
    name: str
    version_id: str
    shards: list[ShardInfo]
    schema: pa.Schema
    pipeline: PipelineInfo | None = None
    parents: list[str] = field(default_factory=list)
    stats: list[StageStats] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)  # shard-level failures: {input, reason}
    created_at: str = ""
    extra: dict = field(default_factory=dict)  # e.g. {"rejects_of": id} or tokenizer facts
    schema_version: int = SCHEMA_VERSION

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.shards)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.shards)

    @property
    def tokens(self) -> int | None:
        counts = [s.tokens for s in self.shards]
        return None if any(t is None for t in counts) else sum(counts)

    def to_dict(self) -> dict:
        d = {
            "schema_version": self.schema_version,
            "name": self.name,
            "version_id": self.version_id,
            "created_at": self.created_at,
            "parents": list(self.parents),
            "pipeline": asdict(self.pipeline) if self.pipeline else None,
            "rows": self.rows,
            "bytes": self.bytes,
            "shards": [{k: v for k, v in asdict(s).items() if v is not None} for s in self.shards],
            "schema": {
                "fields": [{"name": f.name, "type": str(f.type)} for f in self.schema],
                "arrow_ipc_b64": schema_to_b64(self.schema),
            },
            "stats": [asdict(s) for s in self.stats],
            "errors": list(self.errors),
            "extra": dict(self.extra),
        }
        if self.schema_version >= 2:
            # the digest of the JSON form (tuples become lists, etc.), which is what a reader sees
            plain = json.loads(canonical_json(d))
            key = signing.manifest_key()
            if key is not None:  # a keyed signature under the digest, which then covers it too
                plain[signing.KEY_ID_FIELD] = d[signing.KEY_ID_FIELD] = signing.key_id(key)
                plain[signing.HMAC_FIELD] = d[signing.HMAC_FIELD] = signing.signature(key, _signed_body(plain))
            d[DIGEST_FIELD] = manifest_digest(plain)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=False, ensure_ascii=False) + "\n"

    @classmethod
    def from_dict(cls, d: dict, *, where: str = "manifest", check_signature: bool = True) -> "Manifest":
        """Check and load a manifest. Anything malformed, edited or unsigned-where-a-key-is-set is a
        ManifestError naming `where`; nothing in the JSON can make this raise anything else.
        (`check_signature=False` only for `data sign`, which verifies the shards instead.)"""
        if not isinstance(d, dict):
            raise ManifestError(f"{where}: expected a JSON object")
        sv = d.get("schema_version")
        if type(sv) is not int or sv not in SUPPORTED_SCHEMA_VERSIONS:
            raise ManifestError(
                f"{where}: unknown schema_version {sv!r}; this cidermill reads "
                f"{sorted(SUPPORTED_SCHEMA_VERSIONS)} (upgrade cidermill to read newer versions)"
            )
        if sv >= 2:
            stored = d.get(DIGEST_FIELD)
            try:
                ok = isinstance(stored, str) and manifest_digest(d) == stored
            except (TypeError, ValueError, RecursionError):
                ok = False
            if not ok:
                raise ManifestError(
                    f"{where}: {DIGEST_FIELD} does not match the manifest's fields; the manifest was "
                    "edited or corrupted after publishing (republish the version, do not edit it)"
                )
        if check_signature:
            key = signing.manifest_key()
            if key is not None:
                signing.check(d, _signed_body(d), key, where=where)
        try:
            manifest = cls._load(d, sv)
        except (KeyError, TypeError, ValueError, AttributeError, pa.ArrowException) as exc:
            raise ManifestError(f"{where}: malformed manifest ({type(exc).__name__}: {exc})") from None
        expected = version_id_of([s.sha256 for s in manifest.shards])
        if manifest.version_id != expected:
            raise ManifestError(
                f"{where}: version_id {manifest.version_id[:12]} does not match its shard hashes "
                f"(expected {expected[:12]}); the manifest was edited or corrupted"
            )
        return manifest

    @classmethod
    def _load(cls, d: dict, sv: int) -> "Manifest":
        def text(value, what: str, pattern: re.Pattern | None = None) -> str:
            if not isinstance(value, str) or (pattern is not None and not pattern.fullmatch(value)):
                raise ValueError(f"{what} is {value!r}")
            return value

        def count(value, what: str) -> int:
            if type(value) is not int or value < 0:
                raise ValueError(f"{what} is {value!r}, not a count")
            return value

        shards = []
        if not isinstance(d["shards"], list):
            raise TypeError("shards is not a list")
        for i, sh in enumerate(d["shards"]):
            tokens = sh.get("tokens")
            shards.append(ShardInfo(
                path=text(sh["path"], f"shards[{i}].path"), rows=count(sh["rows"], f"shards[{i}].rows"),
                bytes=count(sh["bytes"], f"shards[{i}].bytes"), sha256=text(sh["sha256"], f"shards[{i}].sha256", _HEX64),
                tokens=None if tokens is None else count(tokens, f"shards[{i}].tokens"),
            ))
        for key, kind in (("parents", list), ("stats", list), ("errors", list), ("extra", dict)):
            if not isinstance(d.get(key, kind()), kind):
                raise TypeError(f"{key} is not a {kind.__name__}")
        if d.get("pipeline") is not None and not isinstance(d["pipeline"], dict):
            raise TypeError("pipeline is not an object")
        return cls(
            name=text(d["name"], "name", _NAME),
            version_id=text(d["version_id"], "version_id", _HEX64),
            shards=shards,
            schema=schema_from_b64(text(d["schema"]["arrow_ipc_b64"], "schema")),
            pipeline=PipelineInfo.from_dict(d["pipeline"]) if d.get("pipeline") else None,
            parents=[text(x, "parents[]") for x in d.get("parents", [])],
            stats=[StageStats.from_dict(s) for s in d.get("stats", [])],
            errors=list(d.get("errors", [])),
            created_at=text(d.get("created_at", ""), "created_at"),
            extra=dict(d.get("extra", {})),
            schema_version=sv,
        )

    @classmethod
    def from_json(cls, text: str | bytes, *, where: str = "manifest", check_signature: bool = True) -> "Manifest":
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:  # bad JSON, bytes that are not UTF-8, absurd nesting
            raise ManifestError(f"{where}: not valid JSON ({_first_line(exc)})") from None
        return cls.from_dict(data, where=where, check_signature=check_signature)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def code_revision() -> str:
    """The git commit of this checkout, `-dirty` when tracked files differ from it; outside a git checkout,
    the installed package version. The one copy: pipelines, tokenizing, synth runs and evals record it."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        rev = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        from importlib.metadata import PackageNotFoundError, version

        try:
            return f"cidermill=={version('cidermill')}"
        except PackageNotFoundError:
            return "unknown"
