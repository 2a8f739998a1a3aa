"""What a repository's license decision reads, gathered by the repos reader and handed to the license stage.

The reader reads; `code_license_v1` decides. So the reader carries, with every file row of a
repository, one JSON document (`license_inputs`, dictionary-encoded: stored once per batch) with
- `files`: the texts of the files a license decision reads, chosen by name: root license files,
  REUSE `LICENSES/`, `REUSE.toml`, `.reuse/dep5` and `*.license` sidecars, license files in folders
  (vendor/x/LICENSE, lib/LICENSE), package metadata, root READMEs, and files a root license file
  names by path (`docs/FTL.TXT`);
- `heads`: the first characters of up to `max_heads` source files (by extension, or a shebang; in path
  order) whose first lines mention a license, for the repository-level header evidence.
Nothing here parses a license.
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Callable

from .license_meta import is_metadata_file
from .license_roles import README, license_role
from .license_scope import CODE_EXTENSIONS

HEAD_CHARS = 3000
MAX_INPUT_CHARS = 400_000  # per file: a longer text is cut (a 2 MB NOTICE says nothing more at its end)
MAX_FOLDER_FILES = 200  # license files inside folders carried per repository
_HINT = re.compile(r"licen[cs]|copyright|spdx|public\s+domain|\(c\)|©|\bGPL|\bMIT\b|\bBSD\b|apache|\bISC\b|"
                   r"\bzlib\b|\bMPL\b|unlicense|\bCC0\b|creative\s+commons|\bWTFPL\b|artistic|eclipse", re.IGNORECASE)
_PATH_TOKEN = re.compile(r"[\w.+-]+(?:/[\w.+-]+)+")


def is_license_input(path: str) -> bool:
    """A file a license decision reads, by its path alone."""
    return (license_role(path) is not None or is_metadata_file(path) or ("/" not in path and bool(README.match(path)))
            or path in ("REUSE.toml", ".reuse/dep5") or path.endswith(".license"))


def collect(paths: list[str], read: Callable[[str], str | None], *, max_heads: int = 30) -> dict:
    """{"files": {path: text}, "heads": {path: first characters}} of one repository; `read` returns None
    for a file it could not read (binary, too large)."""
    files: dict[str, str] = {}
    in_folders = 0
    for path in paths:
        if not is_license_input(path):
            continue
        if license_role(path) in ("directory", "bundled") and "/" in path:
            if in_folders >= MAX_FOLDER_FILES:
                continue
            in_folders += 1
        text = read(path)
        if text is not None:
            files[path] = text[:MAX_INPUT_CHARS]
    named = {t.lower() for p, t in files.items() if "/" not in p and license_role(p) == "own"
             for t in _PATH_TOKEN.findall(t)}
    for path in paths:  # `docs/FTL.TXT` in "the FreeType License, found in the file docs/FTL.TXT"
        if path not in files and path.lower() in named:
            text = read(path)
            if text is not None:
                files[path] = text[:MAX_INPUT_CHARS]
    heads: dict[str, str] = {}
    for path in paths:
        if len(heads) >= max_heads:
            break
        ext = posixpath.splitext(path.lower())[1]
        if path in files or (ext not in CODE_EXTENSIONS and ext):
            continue  # source files only: a config or data file naming a license is not a header
        text = read(path)
        if text is not None and (ext or text.startswith("#!")) and _HINT.search(text[:HEAD_CHARS]):
            heads[path] = text[:HEAD_CHARS]
    return {"files": files, "heads": heads}


def pack(inputs: dict) -> str:
    return json.dumps(inputs, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def unpack(blob: str) -> dict:
    data = json.loads(blob)
    return {"files": dict(data.get("files", {})), "heads": dict(data.get("heads", {}))}
