"""Which file plays which role in a repository's licensing, by its path alone.

- own: license files at the root (LICENSE*, LICENCE*, COPYING*, UNLICENSE, COPYRIGHT*, PATENTS, and
  files named as a license id: `epl-v20`, `MIT.txt`);
- reuse: the REUSE `LICENSES/` folder;
- directory: a license file inside a folder of the project (`lib/LICENSE`, `tsl/LICENSE-TIMESCALE`,
  `pkg/License/license.txt`): it covers that folder;
- bundled: third-party notices (THIRD-PARTY*, NOTICE), texts under vendor/ or third_party/;
- artifact: licenses of non-code artifacts, named so (`LICENSE_weights`, `MODEL_LICENSE`, `LICENSE-docs`);
- other: files such as `copyright-exclude`.
The repos reader hands the texts of these files (and the metadata, READMEs and REUSE files) to the
license stage; nothing here reads a file.
"""

from __future__ import annotations

import posixpath
import re

_LICENSE_NAME = re.compile(r"^(?:un)?licen[cs]e|^copying|^copyright|^patents(?:\.|$)", re.IGNORECASE)
# a root file named after the license it holds: `epl-v20`, `edl-v10`, `MIT.txt`, `GPL-3.0.txt`, `gpl-2.0`
_ID_NAME = re.compile(r"^(?:[al]?gpl|epl|edl|mpl|apache|mit|bsd|isc|cc0|cc-by(?:-[a-z]+)*|artistic|zlib|wtfpl|ofl|"
                      r"eupl|cddl|upl|bsl|0bsd)(?:[-_.]?v?\d[\d.]*)?(?:[-_.](?:only|or-later|\d-clause))?"
                      r"(?:\.(?:txt|md|rst|html?))?$", re.IGNORECASE)
_CODE_SUFFIX = re.compile(r"\.(py|js|ts|rb|go|java|c|h|cc|cpp|hpp|rs|php|pl|sh|swift|m|kt|scala|cs|json|ya?ml|"
                          r"toml|xml|svg|png|jpe?g|gif|lock|cfg|ini)$", re.IGNORECASE)
_BUNDLED = {"third", "thirdparty", "3rdparty", "vendor", "vendored", "notice", "notices", "dependencies", "deps",
            "external", "bundled"}
# the words in a license file's name that say what it covers (license_scope.py kinds)
_ARTIFACT = {"weights": "weights", "weight": "weights", "model": "weights", "models": "weights",
             "checkpoints": "weights", "data": "data", "dataset": "data", "datasets": "data", "docs": "docs",
             "doc": "docs", "documentation": "docs", "content": "docs", "contents": "docs", "book": "docs",
             "text": "docs", "assets": "media", "asset": "media", "art": "media", "artwork": "media",
             "images": "media", "image": "media", "media": "media", "audio": "media", "sounds": "media",
             "music": "media", "icons": "media", "samples": "data", "fonts": "fonts", "font": "fonts"}
_OTHER = {"exclude", "excludes", "ignore", "template", "check", "list"}
_BUNDLED_DIRS = {"vendor", "third_party", "third-party", "thirdparty", "3rdparty", "node_modules", "external", "deps"}
_NOTICES = re.compile(r"^(?:third[-_ ]?party|3rd[-_ ]?party)[-_ ]?(?:notices?|licen[cs]es?)", re.IGNORECASE)
_REUSE_DIRS = ("licenses", "license", "licences")
README = re.compile(r"^readme(\.(md|markdown|rst|txt|adoc|org))?$", re.IGNORECASE)
_HEADING = re.compile(r"^(#{1,6})\s*(.+?)\s*#*\s*$|^(.+)\n(=+|-+)\s*$", re.MULTILINE)


def _license_named(name: str) -> bool:
    return bool(_LICENSE_NAME.match(name)) and not _CODE_SUFFIX.search(name)


def license_role(path: str) -> str | None:
    """own | reuse | directory | bundled | artifact | other for license-like files; None for the rest."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0].lower() in _REUSE_DIRS:
        return None if _CODE_SUFFIX.search(parts[1]) else "reuse"
    name = parts[-1]
    if len(parts) == 1 and _NOTICES.match(name) and not _CODE_SUFFIX.search(name):
        return "bundled"  # THIRD-PARTY-NOTICES.txt, ThirdPartyNotices, 3rdparty-licenses
    if len(parts) == 1 and _ID_NAME.match(name):
        return "own"
    if not _license_named(name):
        return None
    if len(parts) > 1:
        if any(p.lower() in _BUNDLED_DIRS for p in parts[:-1]):
            return "bundled"
        return "directory"
    tokens = {t for t in re.split(r"[-_.\s]+", name.lower()) if t}
    if tokens & _OTHER:
        return "other"
    if tokens & _BUNDLED or "party" in tokens:
        return "bundled"
    if tokens & set(_ARTIFACT):
        return "artifact"
    return "own"


def artifact_kind(path: str) -> str | None:
    """The artifact a license file's name says it covers (`LICENSE_weights` -> weights)."""
    tokens = [t for t in re.split(r"[-_.\s]+", posixpath.basename(path).lower()) if t]
    return next((_ARTIFACT[t] for t in tokens if t in _ARTIFACT), None)


def covered_folder(path: str) -> str:
    """The folder a directory license file covers: its own, or the one above a `License/` folder."""
    folder = posixpath.dirname(path)
    if posixpath.basename(folder).lower() in _REUSE_DIRS:
        folder = posixpath.dirname(folder)
    return folder


def is_license_file(path: str) -> bool:
    """A root license file or a REUSE `LICENSES/` text (whatever its role)."""
    role = license_role(path)
    return role in ("own", "reuse", "artifact", "other") or (role == "bundled" and "/" not in path)


def readme_license_section(text: str) -> str | None:
    """The heading that names the license and the body under it (Markdown `#` or underlined), if any."""
    heads = [(m.start(), m.end(), len(m.group(1)) if m.group(1) else (1 if m.group(4)[0] == "=" else 2),
              m.group(2) or m.group(3)) for m in _HEADING.finditer(text)]
    for i, (_, end, level, title) in enumerate(heads):
        if re.search(r"licen[cs]", title, re.IGNORECASE):
            stop = next((s for s, _, lv, _ in heads[i + 1:] if lv <= level), len(text))
            rest = re.sub(r"^.*?licen[cs]es?\b\s*[:\-—]?", "", title, count=1, flags=re.IGNORECASE).strip()
            body = text[end:stop]
            return f"{title}\n{body}" if rest else body  # `## License: MIT © Jane Doe`
    return None
