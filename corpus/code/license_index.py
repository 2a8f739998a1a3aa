"""A compact license matching index built from the shared license data at first use.

Inputs (../shared/data/licenses): ScanCode LicenseDB texts (2,310) and rules (34,859 labelled
texts, notices, references, tags), SPDX license texts (819). Two structures come out:

- full texts as word sets in a posting list (word -> candidates), for a Dice coefficient of a
  whole license file against every known text in one numpy pass;
- short rules (notices, references, tags) as word sequences keyed by their first words, for
  exact phrase matches inside READMEs and file headers.

Everything is mapped to SPDX ids at build time. The index is cached as one pickle under
CIDERMILL_CACHE/license-index/<hash of the source files and BUILD_VERSION>; nothing generated
is committed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import re
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .license_text import front_matter, words
from .paths import cache_dir, shared_data

log = logging.getLogger("cidermill.license")

BUILD_VERSION = 4  # bump when the normalisation or the selection of rules changes
SEQ_MAX_WORDS = 120  # license-text rules up to this length also match as phrases
KEY_WORDS = 3  # phrase rules are looked up by their first words
_KEY_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+\-_]*")
_OPERATORS = {"and": "AND", "or": "OR", "with": "WITH"}


@dataclass
class LicenseIndex:
    spdx_ids: dict[str, str]  # lower-case id -> canonical SPDX id (licenses and exceptions)
    vocab: dict[str, int]
    full_exprs: list[str]  # candidate -> SPDX expression
    full_rank: np.ndarray  # candidate -> 0 license text, 1 SPDX text, 2 rule (ties go to the lower)
    full_sizes: np.ndarray  # candidate -> number of distinct words
    indptr: np.ndarray  # CSR over words: postings of word w are cand_ids[indptr[w]:indptr[w+1]]
    cand_ids: np.ndarray
    seq_rules: list[tuple[tuple[str, ...], str, str]] = field(default_factory=list)  # (words, expr, kind)
    seq_keys: dict[tuple[str, ...], list[int]] = field(default_factory=dict)


def _scancode_keymap(licenses_dir: Path) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """ScanCode key -> SPDX id (LicenseRef-scancode-<key> when SPDX has none), plus (key, text)."""
    keymap, texts = {}, []
    for path in sorted(licenses_dir.glob("*.LICENSE")):
        meta, body = front_matter(path.read_text(encoding="utf-8", errors="replace"))
        key = meta.get("key") or path.stem
        keymap[key] = meta.get("spdx_license_key") or f"LicenseRef-scancode-{key}"
        if meta.get("is_deprecated") != "yes" and meta.get("is_unknown") != "yes":
            texts.append((key, body))
    return keymap, texts


def scancode_to_spdx(expression: str, keymap: dict[str, str]) -> str:
    """`mit OR gpl-2.0-plus` -> `MIT OR GPL-2.0-or-later`."""
    def repl(m: re.Match) -> str:
        tok = m.group(0)
        return _OPERATORS.get(tok.lower()) or keymap.get(tok, f"LicenseRef-scancode-{tok}")
    return _KEY_TOKEN.sub(repl, expression)


def _source_files(root: Path) -> list[Path]:
    sc = root / "scancode_licensedb"
    spdx = root / "spdx_license_list_xml"
    return [sc / "rules.tar.gz", spdx / "index.json", *sorted((sc / "licenses").glob("*.LICENSE")),
            *sorted((spdx / "texts").glob("*.txt"))]


def _fingerprint(files: list[Path]) -> str:
    h = hashlib.sha256(f"v{BUILD_VERSION}".encode())
    for p in files:
        h.update(p.name.encode())
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:24]


def build_index(root: Path) -> LicenseIndex:
    sc, spdx_dir = root / "scancode_licensedb", root / "spdx_license_list_xml"
    keymap, sc_texts = _scancode_keymap(sc / "licenses")
    spdx_list = json.loads((spdx_dir / "index.json").read_text())
    spdx_ids = {e["id"].lower(): e["id"] for e in spdx_list}
    full: list[tuple[str, int, list[str]]] = []
    seq: list[tuple[tuple[str, ...], str, str]] = []
    for key, body in sc_texts:
        full.append((keymap[key], 0, words(body)))
    for entry in spdx_list:
        if entry["kind"] == "license" and not entry["deprecated"] and entry.get("text"):
            path = spdx_dir / entry["text"]
            if path.exists():
                full.append((entry["id"], 1, words(path.read_text(encoding="utf-8", errors="replace"))))
    with tarfile.open(sc / "rules.tar.gz") as tar:
        for member in tar:
            if not member.isfile() or not member.name.endswith(".RULE"):
                continue
            meta, body = front_matter(tar.extractfile(member).read().decode("utf-8", "replace"))
            if any(meta.get(k) == "yes" for k in ("is_false_positive", "is_deprecated", "is_license_intro",
                                                  "is_license_clue")):
                continue
            expr = meta.get("license_expression")
            if not expr or int(meta.get("relevance", "100") or 100) < 80:
                continue
            expr = scancode_to_spdx(expr, keymap)
            seq_words = words(body, strip_copyright=False)
            if meta.get("is_license_text") == "yes":
                full.append((expr, 2, words(body)))
                if len(seq_words) > SEQ_MAX_WORDS:
                    continue
                kind = "text"
            else:
                kind = next((k for k in ("notice", "reference", "tag") if meta.get(f"is_license_{k}") == "yes"),
                            "notice")
            if len(seq_words) >= 3 or _distinctive(seq_words):
                seq.append((tuple(seq_words), expr, kind))
    full = [f for f in full if len(set(f[2])) >= 10]
    return _assemble(spdx_ids, full, seq)


def _distinctive(ws: list[str]) -> bool:
    """Short rules that are safe as phrases: `license mit`, `gplv2+`, `lgplv3` (not `mit`, `bsd`)."""
    if len(ws) == 2:
        return any(w.startswith("licen") for w in ws) or all(any(c.isdigit() for c in w) for w in ws[1:])
    return len(ws) == 1 and bool(re.fullmatch(r"[a-z]+v?\d[\d.]*\+?", ws[0])) and len(ws[0]) >= 4


def _assemble(spdx_ids, full, seq) -> LicenseIndex:
    vocab: dict[str, int] = {}
    rows, cols, sizes = [], [], []
    for i, (_, _, ws) in enumerate(full):
        ids = sorted({vocab.setdefault(w, len(vocab)) for w in ws})
        rows.append(np.full(len(ids), i, np.int32))
        cols.append(np.asarray(ids, np.int32))
        sizes.append(len(ids))
    row, col = np.concatenate(rows), np.concatenate(cols)
    order = np.argsort(col, kind="stable")
    indptr = np.zeros(len(vocab) + 1, np.int64)
    np.add.at(indptr, col + 1, 1)
    seq_keys: dict[tuple[str, ...], list[int]] = {}
    seen = set()
    unique_seq = []
    for ws, expr, kind in seq:
        if (ws, expr) in seen:
            continue
        seen.add((ws, expr))
        seq_keys.setdefault(ws[:KEY_WORDS], []).append(len(unique_seq))  # shorter rules: their whole words
        unique_seq.append((ws, expr, kind))
    return LicenseIndex(
        spdx_ids=spdx_ids, vocab=vocab, full_exprs=[f[0] for f in full],
        full_rank=np.asarray([f[1] for f in full], np.int8), full_sizes=np.asarray(sizes, np.int32),
        indptr=np.cumsum(indptr), cand_ids=row[order], seq_rules=unique_seq, seq_keys=seq_keys)


_LOADED: dict[str, LicenseIndex] = {}  # by root folder: fingerprinting reads every source file once


def load_index(root: str | os.PathLike | None = None) -> LicenseIndex:
    """The index for the license data under `root` (default: shared data), built once and cached."""
    root = Path(root) if root else shared_data("licenses")
    if str(root) in _LOADED:
        return _LOADED[str(root)]
    files = _source_files(root)
    missing = [str(p) for p in files[:2] if not p.exists()]
    if missing:
        from manifests.errors import ConfigError

        raise ConfigError(f"license data incomplete under {root}: missing {missing}")
    key = _fingerprint(files)
    path = cache_dir("license-index") / f"{key}.pkl"
    if path.exists():
        with open(path, "rb") as f:
            index = pickle.load(f)
    else:
        start = time.perf_counter()
        index = build_index(root)
        tmp = path.with_suffix(f".tmp-{os.getpid()}")
        with open(tmp, "wb") as f:
            pickle.dump(index, f, protocol=5)
        os.replace(tmp, path)
        log.info("built license index %s in %.1f s (%d texts, %d phrases)", path, time.perf_counter() - start,
                 len(index.full_exprs), len(index.seq_rules))
    _LOADED[str(root)] = index
    return index
