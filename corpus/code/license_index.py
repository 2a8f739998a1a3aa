"""A compact license matching index built at first use from the `licensedcode-data` registry package.

Inputs: ScanCode's LicenseDB as packaged on PyPI (`licensedcode-data`, CC-BY-4.0): 2,310 license
texts with their SPDX keys and 34,859 rules (labelled texts, notices, references, tags); the SPDX
ids and exceptions come from the same texts' front matter and from `license-expression`'s
LicenseDB key index. Nothing is read from outside the installed packages. Two structures come out:

- full texts as word sets in a posting list (word -> candidates), for a Dice coefficient of a
  whole license file against every known text in one numpy pass;
- short rules (notices, references, tags) as word sequences keyed by their first words, for
  exact phrase matches inside READMEs and file headers.

Everything is mapped to SPDX ids at build time. The index is cached as one pickle under
CIDERMILL_CACHE/license-index/<hash of the source files and BUILD_VERSION>; nothing generated
is committed. `load_index(folder)` builds from another copy of the same layout (licenses/, rules/).
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
from .paths import cache_dir

log = logging.getLogger("cidermill.license")

BUILD_VERSION = 6  # bump when the normalisation or the selection of rules changes
SEQ_MAX_WORDS = 120  # license-text rules up to this length also match as phrases
KEY_WORDS = 3  # phrase rules are looked up by their first words
_KEY_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+\-_]*")
_OPERATORS = {"and": "AND", "or": "OR", "with": "WITH"}


@dataclass
class LicenseIndex:
    spdx_ids: dict[str, str]  # lower-case id -> canonical SPDX id (licenses and exceptions)
    vocab: dict[str, int]
    full_exprs: list[str]  # candidate -> SPDX expression
    full_rank: np.ndarray  # candidate -> 0 license text, 2 rule (1 was SPDX texts, now covered by LicenseDB) (ties go to the lower)
    full_sizes: np.ndarray  # candidate -> number of distinct words
    indptr: np.ndarray  # CSR over words: postings of word w are cand_ids[indptr[w]:indptr[w+1]]
    cand_ids: np.ndarray
    seq_rules: list[tuple[tuple[str, ...], str, str]] = field(default_factory=list)  # (words, expr, kind)
    seq_keys: dict[tuple[str, ...], list[int]] = field(default_factory=dict)


def _scancode_keymap(licenses_dir: Path) -> tuple[dict[str, str], list[tuple[str, str]], dict[str, str]]:
    """ScanCode key -> SPDX id (LicenseRef-scancode-<key> when SPDX has none), (key, text), SPDX ids."""
    keymap, texts, spdx_ids = {}, [], {}
    for path in sorted(licenses_dir.glob("*.LICENSE")):
        meta, body = front_matter(path.read_text(encoding="utf-8", errors="replace"))
        key = meta.get("key") or path.stem
        spdx = meta.get("spdx_license_key")
        keymap[key] = spdx or f"LicenseRef-scancode-{key}"
        if spdx and not spdx.startswith("LicenseRef"):
            spdx_ids[spdx.lower()] = spdx
        if meta.get("is_deprecated") != "yes" and meta.get("is_unknown") != "yes":
            texts.append((key, body))
    return keymap, texts, spdx_ids


def _key_index_ids() -> dict[str, str]:
    """Current and deprecated SPDX ids (`GPL-2.0`, exceptions) from license-expression's LicenseDB index."""
    from importlib.resources import files

    path = files("license_expression") / "data" / "scancode-licensedb-index.json"
    out = {}
    for entry in json.loads(path.read_text(encoding="utf-8")):
        for key in [entry.get("spdx_license_key")] + list(entry.get("other_spdx_license_keys") or []):
            if key and " " not in key and not key.startswith("LicenseRef"):
                out.setdefault(key.lower(), key)
    return out


def scancode_to_spdx(expression: str, keymap: dict[str, str]) -> str:
    """`mit OR gpl-2.0-plus` -> `MIT OR GPL-2.0-or-later`."""
    def repl(m: re.Match) -> str:
        tok = m.group(0)
        return _OPERATORS.get(tok.lower()) or keymap.get(tok, f"LicenseRef-scancode-{tok}")
    return _KEY_TOKEN.sub(repl, expression)


def package_data() -> Path:
    """The LicenseDB folder installed by the `licensedcode-data` package (licenses/, rules/)."""
    from importlib import metadata

    from manifests.errors import ConfigError

    try:
        folder = Path(metadata.distribution("licensedcode-data").locate_file("licensedcode/data"))
    except metadata.PackageNotFoundError:
        folder = None
    if folder is None or not (folder / "licenses").is_dir():
        raise ConfigError("license data not installed: pip install 'licensedcode-data>=32.1' "
                          "(requirements/code_math.txt), or pass a LicenseDB folder with licenses/ and rules/")
    return folder


def _fingerprint(root: Path) -> str:
    """Package versions when the data is the installed package; else names and sizes of the files."""
    from importlib import metadata

    h = hashlib.sha256(f"v{BUILD_VERSION}".encode())
    h.update(metadata.version("license-expression").encode())
    try:
        installed = root.resolve() == package_data().resolve()
    except Exception:
        installed = False
    if installed:
        h.update(("licensedcode-data " + metadata.version("licensedcode-data")).encode())
    else:
        for sub in ("licenses", "rules"):
            for p in sorted((root / sub).iterdir()):
                h.update(f"{p.name}:{p.stat().st_size}".encode())
    return h.hexdigest()[:24]


def _rules(root: Path):
    """(name, raw text) of every rule file: a rules/ folder, or the rules.tar.gz of a copied LicenseDB."""
    folder = root / "rules"
    if folder.is_dir():
        for path in sorted(folder.glob("*.RULE")):
            yield path.name, path.read_text(encoding="utf-8", errors="replace")
        return
    with tarfile.open(root / "rules.tar.gz") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(".RULE"):
                yield member.name, tar.extractfile(member).read().decode("utf-8", "replace")


def build_index(root: Path) -> LicenseIndex:
    keymap, sc_texts, spdx_ids = _scancode_keymap(root / "licenses")
    for low, key in _key_index_ids().items():
        spdx_ids.setdefault(low, key)
    full: list[tuple[str, int, list[str]]] = []
    seq: list[tuple[tuple[str, ...], str, str]] = []
    for key, body in sc_texts:
        full.append((keymap[key], 0, words(body)))
    for _, raw in _rules(root):
        meta, body = front_matter(raw)
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
        if (len(seq_words) >= 3 or _distinctive(seq_words)) and not set(seq_words) <= _GENERIC:
            seq.append((tuple(seq_words), expr, kind))
    full = [f for f in full if len(set(f[2])) >= 10]
    return _assemble(spdx_ids, full, seq)


# phrases made only of these words name no license ("license license" is a ScanCode rule for MIT)
_GENERIC = {"license", "licenses", "licensed", "licensing", "the", "a", "an", "this", "is", "under", "of", "and", "or",
            "software", "see", "terms", "copyright", "file", "notice", "by", "for", "to", "in", "use", "free", "open",
            "source", "code", "s", "same", "as", "other", "standard", "new"}


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


_LOADED: dict[str, LicenseIndex] = {}  # by data folder


def load_index(root: str | os.PathLike | None = None) -> LicenseIndex:
    """The index for the LicenseDB under `root` (default: the installed licensedcode-data), built once and cached."""
    root = Path(root) if root else package_data()
    if str(root) in _LOADED:
        return _LOADED[str(root)]
    if not (root / "licenses").is_dir() or not ((root / "rules").is_dir() or (root / "rules.tar.gz").exists()):
        from manifests.errors import ConfigError

        raise ConfigError(f"license data incomplete under {root}: needs licenses/ and rules/ (or rules.tar.gz)")
    key = _fingerprint(root)
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
