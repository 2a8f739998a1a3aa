"""License statements in package metadata at a repository's root.

Each format is read with its own parser (json, tomllib, configparser, ElementTree; `setup.py` and
gemspecs are code, read with patterns for their literal `license=`/`classifiers=` arguments).
Values come back as `Declared(path, field, values, kind)`:
- kind `spdx`: a field defined to hold an SPDX expression (package.json `license`, Cargo.toml
  `license`, pyproject `project.license` as a string (PEP 639), composer.json `license`);
- kind `name`: free text naming a license (setup.py/setup.cfg `license`, pom.xml `<name>`, gemspec
  `license(s)`, pyproject `license = {text = ...}`);
- kind `classifier`: Trove `License ::` classifiers;
- kind `cpan`: CPAN license strings (META.json/META.yml `license`, dist.ini `license`, Makefile.PL
  `LICENSE =>`, Build.PL `license =>`): `perl_5` is Perl's own terms, `Artistic-1.0-Perl OR GPL-1.0-or-later`.
Several values in one list field are alternatives: composer and Maven document it so, npm's old
`licenses` array, gemspec `licenses` and several license classifiers are used that way.
"""

from __future__ import annotations

import configparser
import json
import re
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Callable, Iterable

META_FILES = ("package.json", "Cargo.toml", "pyproject.toml", "setup.cfg", "setup.py", "pom.xml",
              "composer.json", "DESCRIPTION", "META.json", "META.yml", "MYMETA.json", "dist.ini", "Makefile.PL",
              "Build.PL")


@dataclass(frozen=True)
class Declared:
    path: str
    field: str
    values: tuple[str, ...]
    kind: str  # spdx | name | classifier | cpan


def is_metadata_file(path: str) -> bool:
    return "/" not in path and (path in META_FILES or path.endswith(".gemspec"))


def read_metadata(paths: Iterable[str], read: Callable[[str], str]) -> tuple[list[Declared], list[tuple[str, str]]]:
    """Declared licenses in the root metadata files, and (path, reason) for files that do not parse."""
    out, problems = [], []
    for path in sorted(p for p in paths if is_metadata_file(p)):
        try:
            out.extend(_one(path, read(path)))
        except (ValueError, SyntaxError, configparser.Error, TypeError, AttributeError) as exc:  # untrusted files
            problems.append((path, f"{type(exc).__name__}: {str(exc)[:80]}"))
    return [d for d in out if d.values], problems


def _strings(value) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value.strip(),) if value.strip() else ()
    if isinstance(value, dict):  # {"type": "MIT", "url": ...} (npm), {text = "..."} (pyproject)
        return _strings(value.get("type") or value.get("name") or value.get("text") or "")
    if isinstance(value, list):
        return tuple(v for item in value for v in _strings(item))
    return ()


def _one(path: str, text: str) -> list[Declared]:
    if path in ("package.json", "composer.json"):
        data = json.loads(text)
        if not isinstance(data, dict):
            return []
        out = [Declared(path, "license", _strings(data.get("license")), "spdx")]
        if "licenses" in data:
            out.append(Declared(path, "licenses", _strings(data.get("licenses")), "spdx"))
        return out
    if path == "Cargo.toml":
        data = tomllib.loads(text)
        pkg = data.get("package", {})
        lic = pkg.get("license")
        if isinstance(lic, dict) and lic.get("workspace"):
            lic = data.get("workspace", {}).get("package", {}).get("license")
        lic = lic if lic is not None else data.get("workspace", {}).get("package", {}).get("license")
        # Cargo's old `MIT/Apache-2.0` form means OR
        return [Declared(path, "package.license", tuple(v.replace("/", " OR ") for v in _strings(lic)), "spdx")]
    if path == "pyproject.toml":
        data = tomllib.loads(text)
        out = []
        for section, table in (("project", data.get("project", {})),
                               ("tool.poetry", data.get("tool", {}).get("poetry", {}))):
            lic = table.get("license")
            if isinstance(lic, str):
                out.append(Declared(path, f"{section}.license", _strings(lic), "spdx"))
            elif isinstance(lic, dict) and "text" in lic:
                out.append(Declared(path, f"{section}.license", _strings(lic), "name"))
            out.append(Declared(path, f"{section}.classifiers", _classifiers(table.get("classifiers")), "classifier"))
        return out
    if path == "setup.cfg":
        cp = configparser.ConfigParser(interpolation=None)
        cp.read_string(text)
        if not cp.has_section("metadata"):
            return []
        meta = cp["metadata"]
        lic = meta.get("license", "") or meta.get("license_expression", "")
        return [Declared(path, "metadata.license", _strings(lic.strip()), "name"),
                Declared(path, "metadata.classifiers", _classifiers(meta.get("classifiers", "").splitlines()),
                         "classifier")]
    if path == "setup.py":
        lic = re.findall(r"\blicen[cs]e\s*=\s*[\"']([^\"'\n]{1,200})[\"']", text)
        return [Declared(path, "license", tuple(dict.fromkeys(lic)), "name"),
                Declared(path, "classifiers", _classifiers(re.findall(r"[\"'](License ::[^\"'\n]+)[\"']", text)),
                         "classifier")]
    if path == "pom.xml":
        root = ET.fromstring(text)
        names = [el.text or "" for el in root.iter() if _tag(el) == "name" and _parent_is_license(root, el)]
        return [Declared(path, "licenses", _strings(names), "name")]
    if path == "DESCRIPTION":  # R packages: `License: MIT + file LICENSE`
        m = re.search(r"^License:\s*(.+(?:\n[ \t]+.+)*)", text, re.MULTILINE)
        value = re.sub(r"\+\s*file\s+LICEN[CS]E", "", m.group(1)).strip() if m else ""
        return [Declared(path, "License", _strings(value.replace("|", " OR ")), "name")]
    if path in ("META.json", "MYMETA.json"):
        data = json.loads(text)
        return [Declared(path, "license", _strings(data.get("license")) if isinstance(data, dict) else (), "cpan")]
    if path == "META.yml":
        m = re.search(r"^license:\s*(.+)$", text, re.MULTILINE)
        vals = re.findall(r"[\w.]+", m.group(1)) if m else []
        if m is None:  # a YAML list under `license:`
            block = re.search(r"^license:\s*\n((?:\s+-\s*\S+\s*\n?)+)", text, re.MULTILINE)
            vals = re.findall(r"-\s*(\S+)", block.group(1)) if block else []
        return [Declared(path, "license", tuple(vals), "cpan")]
    if path == "dist.ini":
        return [Declared(path, "license", tuple(re.findall(r"^license\s*=\s*(\S+)", text, re.MULTILINE)), "cpan")]
    if path in ("Makefile.PL", "Build.PL"):
        vals = re.findall(r"[\"']?\blicen[cs]e[\"']?\s*=>\s*[\"']([\w.]+)[\"']", text, re.IGNORECASE)
        return [Declared(path, "license", tuple(dict.fromkeys(vals)), "cpan")]
    if path.endswith(".gemspec"):
        vals = []
        for m in re.finditer(r"\.licen[cs]es?\s*=\s*(\[[^\]]*\]|%w[\[(][^\])]*[\])]|[\"'][^\"']+[\"'])", text):
            raw = m.group(1)
            vals += raw[3:-1].split() if raw.startswith("%w") else re.findall(r"[\"']([^\"']+)[\"']", raw)
        return [Declared(path, "licenses", _strings(vals), "name")]
    return []


def _tag(el) -> str:
    return el.tag.rsplit("}", 1)[-1]


def _parent_is_license(root, target) -> bool:
    for parent in root.iter():
        if _tag(parent) == "license" and target in list(parent):
            return True
    return False


def _classifiers(values) -> tuple[str, ...]:
    if not isinstance(values, list):
        return ()
    return tuple(v.strip() for v in values if isinstance(v, str) and v.strip().startswith("License ::"))


# Trove license classifiers -> SPDX (the unversioned family names are left to the license files).
CLASSIFIERS = {
    "MIT License": "MIT", "MIT No Attribution License (MIT-0)": "MIT-0", "ISC License (ISCL)": "ISC",
    "Apache Software License": "Apache-2.0", "BSD License": "LicenseRef-cidermill-family-BSD",
    "Zero-Clause BSD (0BSD)": "0BSD", "The Unlicense (Unlicense)": "Unlicense",
    "Boost Software License 1.0 (BSL-1.0)": "BSL-1.0", "Python Software Foundation License": "PSF-2.0",
    "Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0", "Mozilla Public License 1.1 (MPL 1.1)": "MPL-1.1",
    "GNU General Public License v2 (GPLv2)": "GPL-2.0-only",
    "GNU General Public License v2 or later (GPLv2+)": "GPL-2.0-or-later",
    "GNU General Public License v3 (GPLv3)": "GPL-3.0-only",
    "GNU General Public License v3 or later (GPLv3+)": "GPL-3.0-or-later",
    "GNU General Public License (GPL)": "LicenseRef-cidermill-family-GPL",
    "GNU Lesser General Public License v2 (LGPLv2)": "LGPL-2.0-only",
    "GNU Lesser General Public License v2 or later (LGPLv2+)": "LGPL-2.0-or-later",
    "GNU Lesser General Public License v3 (LGPLv3)": "LGPL-3.0-only",
    "GNU Lesser General Public License v3 or later (LGPLv3+)": "LGPL-3.0-or-later",
    "GNU Library or Lesser General Public License (LGPL)": "LicenseRef-cidermill-family-LGPL",
    "GNU Affero General Public License v3": "AGPL-3.0-only",
    "GNU Affero General Public License v3 or later (AGPLv3+)": "AGPL-3.0-or-later",
    "Eclipse Public License 1.0 (EPL-1.0)": "EPL-1.0", "Eclipse Public License 2.0 (EPL-2.0)": "EPL-2.0",
    "European Union Public Licence 1.2 (EUPL 1.2)": "EUPL-1.2", "Artistic License": "Artistic-2.0",
    "Academic Free License (AFL)": "LicenseRef-cidermill-family-AFL", "zlib/libpng License": "Zlib",
    "CC0 1.0 Universal (CC0 1.0) Public Domain Dedication": "CC0-1.0",
    "Universal Permissive License (UPL)": "UPL-1.0", "Historical Permission Notice and Disclaimer (HPND)": "HPND",
    "Other/Proprietary License": "LicenseRef-cidermill-proprietary",
    "Freely Distributable": "LicenseRef-cidermill-family-free", "Freeware": "LicenseRef-cidermill-proprietary",
    "Free For Educational Use": "LicenseRef-cidermill-field-of-use",
    "Free For Home Use": "LicenseRef-cidermill-field-of-use",
    "Free for non-commercial use": "LicenseRef-cidermill-non-commercial",
    "Free To Use But Restricted": "LicenseRef-cidermill-proprietary",
    "Public Domain": "LicenseRef-cidermill-family-public-domain",
}


def classifier_expression(classifier: str) -> str | None:
    """`License :: OSI Approved :: MIT License` -> `MIT`; None for names not in the table."""
    name = classifier.split("::")[-1].strip()
    return CLASSIFIERS.get(name)


PERL_5 = "Artistic-1.0-Perl OR GPL-1.0-or-later"
# CPAN::Meta::Spec license strings and the older Module::Build/ExtUtils::MakeMaker ones -> SPDX
CPAN = {
    "perl_5": PERL_5, "perl": PERL_5, "artistic_1": "Artistic-1.0-Perl", "artistic": "Artistic-1.0-Perl",
    "artistic_2": "Artistic-2.0", "artistic2": "Artistic-2.0", "apache_1_1": "Apache-1.1", "apache_2_0": "Apache-2.0",
    "apache": "Apache-2.0", "bsd": "BSD-3-Clause", "freebsd": "BSD-2-Clause", "mit": "MIT", "zlib": "Zlib",
    "gpl_1": "GPL-1.0-only", "gpl_2": "GPL-2.0-only", "gpl2": "GPL-2.0-only", "gpl_3": "GPL-3.0-only",
    "gpl3": "GPL-3.0-only", "gpl": "LicenseRef-cidermill-family-GPL", "lgpl_2_1": "LGPL-2.1-only",
    "lgpl2": "LGPL-2.1-only", "lgpl_3_0": "LGPL-3.0-only", "lgpl3": "LGPL-3.0-only",
    "lgpl": "LicenseRef-cidermill-family-LGPL", "agpl_3": "AGPL-3.0-only", "mozilla_1_0": "MPL-1.0",
    "mozilla_1_1": "MPL-1.1", "mozilla": "MPL-1.1", "openssl": "OpenSSL", "qpl_1_0": "QPL-1.0",
    "sun": "SISSL", "gfdl_1_2": "GFDL-1.2-only", "gfdl_1_3": "GFDL-1.3-only",
    "restricted": "LicenseRef-cidermill-proprietary", "restrictive": "LicenseRef-cidermill-proprietary",
}


def cpan_expression(value: str) -> str | None:
    """`perl_5` -> `Artistic-1.0-Perl OR GPL-1.0-or-later`; None for `open_source`, `unknown` and the like."""
    return CPAN.get(value.strip().lower())
