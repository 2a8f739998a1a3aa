"""Constructed repositories for each license-combination pattern of issue 23.

Each case is a small repository (path -> text) built from real license texts (ScanCode's LicenseDB
as installed by `licensedcode-data`) and real metadata formats (package.json, Cargo.toml,
pyproject.toml, setup.cfg, setup.py, pom.xml, gemspec, composer.json, R DESCRIPTION), with the
expected SPDX expression and keep/drop decision under the permissive set, written by hand from
what the files say (not from the detector's output).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Case:
    name: str
    pattern: str
    files: dict
    expected: str  # SPDX expression (markers: the restrictive term the text adds)
    keep: bool


@lru_cache(maxsize=None)
def text(key: str) -> str:
    """A license text from the installed LicenseDB (`mit`, `apache-2.0`, ...), front matter removed."""
    from corpus.code.license_index import package_data
    from corpus.code.license_text import front_matter

    return front_matter((package_data() / "licenses" / f"{key}.LICENSE").read_text(encoding="utf-8"))[1].strip()


def _mit(holder: str = "2023 Jane Doe") -> str:
    return text("mit").replace("Permission is hereby", f"MIT License\n\nCopyright (c) {holder}\n\nPermission is hereby", 1)


def _pkg(**fields) -> str:
    return json.dumps({"name": "demo", "version": "1.0.0", **fields}, indent=2)


NC = "LicenseRef-cidermill-non-commercial"
FIELD = "LicenseRef-cidermill-field-of-use"
AMB = "LicenseRef-cidermill-ambiguous"
SRC = {"src/main.py": "def main():\n    return 0\n"}


def cases() -> list[Case]:
    mit, apache, gpl2, gpl3 = _mit(), text("apache-2.0"), text("gpl-2.0"), text("gpl-3.0")
    c = []

    def add(name, pattern, files, expected, keep):
        c.append(Case(name, pattern, {**SRC, **files}, expected, keep))

    # 1. OR across files and sentences
    add("rust-dual-files", "or-files", {"LICENSE-MIT": mit, "LICENSE-APACHE": apache}, "MIT OR Apache-2.0", True)
    add("rust-triple-files", "or-files", {"LICENSE-MIT": mit, "LICENSE-APACHE": apache, "LICENSE-ZLIB": text("zlib")},
        "MIT OR Apache-2.0 OR Zlib", True)
    add("gpl-or-mit-files", "or-files", {"COPYING": gpl3, "LICENSE-MIT": mit}, "GPL-3.0-only OR MIT", True)
    add("dual-sentence-over-gpl-text", "or-sentence",
        {"COPYING": "This library is dual licensed under the MIT license and the GNU General Public License "
                    "version 2. You may choose either license.\n\n" + gpl2}, "MIT OR GPL-2.0-only", True)
    add("readme-either-of", "or-sentence",
        {"README.md": "# tool\n\nFast.\n\n## License\n\nLicensed under either of\n\n * Apache License, Version 2.0, "
                      "([LICENSE-APACHE](LICENSE-APACHE))\n * MIT license ([LICENSE-MIT](LICENSE-MIT))\n\n"
                      "at your option.\n\n## Contributing\n\nPRs welcome.\n"}, "Apache-2.0 OR MIT", True)
    add("gpl-or-commercial", "or-sentence",
        {"LICENSE": "This program is available under the GNU Affero General Public License v3.0 or, alternatively, "
                    "under a commercial license from Example Ltd.\n\n" + text("agpl-3.0")},
        "AGPL-3.0-only OR LicenseRef-scancode-commercial-license", False)
    add("readme-bare-id", "readme", {"README.md": "# pad\n\nPads.\n\n## License\n\nMIT\n"}, "MIT", True)
    add("readme-short-or", "readme", {"README.md": "# x\n\nLicense\n-------\n\nMIT or Apache-2.0, at your option.\n"},
        "MIT OR Apache-2.0", True)
    add("readme-names-a-dependency", "readme",
        {"LICENSE": mit, "README.md": "# tool\n\n## License\n\nThis project is licensed under the MIT License - see "
                                      "[LICENSE](LICENSE).\n\nIt calls `ffmpeg`, which is licensed under the GNU "
                                      "General Public License version 2, as a separate program.\n"}, "MIT", True)
    add("readme-link-id", "readme", {"README.md": "# x\n\n## License\n\n[MIT](LICENSE) © Jane Doe\n"}, "MIT", True)
    add("apache-notice-file", "notice", {"LICENSE": "Copyright 2020 Example Inc.\n\nLicensed under the Apache License, "
                                         "Version 2.0 (the \"License\");\nyou may not use this file except in "
                                         "compliance with the License.\nYou may obtain a copy of the License at\n\n"
                                         "    http://www.apache.org/licenses/LICENSE-2.0\n\nUnless required by "
                                         "applicable law or agreed to in writing, software\ndistributed under the "
                                         "License is distributed on an \"AS IS\" BASIS,\nWITHOUT WARRANTIES OR "
                                         "CONDITIONS OF ANY KIND, either express or implied.\nSee the License for the "
                                         "specific language governing permissions and\nlimitations under the License.\n"},
        "Apache-2.0", True)
    add("lgpl3-beside-gpl3", "and-in-file", {"COPYING": gpl3, "COPYING.LESSER": text("lgpl-3.0")}, "LGPL-3.0-only", False)
    add("cargo-workspace", "metadata", {"Cargo.toml": '[workspace]\nmembers = ["a"]\n\n[workspace.package]\nlicense = '
                                                      '"Apache-2.0 OR MIT"\n', "LICENSE-MIT": mit,
                                        "LICENSE-APACHE": apache}, "Apache-2.0 OR MIT", True)
    add("setup-py-bsd-word", "metadata", {"setup.py": "setup(name='x', license='BSD')\n", "LICENSE": text("bsd-new")},
        "BSD-3-Clause", True)
    add("two-texts-no-statement", "and-in-file", {"LICENSE": mit + "\n\n" + text("bsd-new")},
        "MIT AND BSD-3-Clause", True)
    add("two-texts-gpl-and-mit", "and-in-file", {"LICENSE": mit + "\n\n" + gpl3}, "MIT AND GPL-3.0-only", False)
    # 2. files that are not the repository's license
    add("license-weights", "artifact", {"LICENSE": mit, "LICENSE_weights": text("cc-by-nc-4.0")}, "MIT", True)
    add("license-docs", "artifact", {"LICENSE": apache, "LICENSE-docs": text("cc-by-sa-4.0")}, "Apache-2.0", True)
    add("bundled-licenses-dir", "bundled", {"LICENSE": apache, "licenses/LICENSE.gpl-3.0.txt": gpl3,
                                            "licenses/LICENSE.lgpl.txt": text("gpl-2.0")}, "Apache-2.0", True)
    add("third-party-notices", "bundled", {"LICENSE": mit, "THIRD-PARTY-NOTICES.txt": "zlib\n\n" + gpl2}, "MIT", True)
    add("vendored-agpl", "bundled", {"LICENSE": text("bsd-new"), "vendor/lib/LICENSE": text("agpl-3.0")},
        "BSD-3-Clause", True)
    add("apache-with-bundled-notices", "bundled",
        {"LICENSE": apache + "\n\n-----\n\nThis product bundles the zlib compression library, which is available "
                             "under the zlib license:\n\n" + text("zlib") + "\n\nThis product includes code from the "
                             "Foo project, licensed under the MIT license:\n\n" + mit}, "Apache-2.0", True)
    add("copyright-exclude", "other-file", {"LICENSE": mit, "copyright-exclude": "debian/*\ntests/data/*\n*.png\n"},
        "MIT", True)
    # 3. statements outside license files
    add("readme-heading-mit", "readme", {"README.md": "# left-pad\n\nPads.\n\n## License: MIT © Jane Doe\n"}, "MIT", True)
    add("readme-apache-prose", "readme", {"README.md": "# x\n\n## License\n\nThis project is licensed under the "
                                                       "Apache License 2.0 - see the LICENSE file.\n"}, "Apache-2.0", True)
    add("readme-rst-gpl", "readme", {"README.rst": "tool\n====\n\nLicense\n-------\n\nReleased under the GNU GPL "
                                                   "version 3.\n"}, "GPL-3.0-only", False)
    add("package-json-mit", "metadata", {"package.json": _pkg(license="MIT")}, "MIT", True)
    add("package-json-unlicensed", "metadata", {"package.json": _pkg(license="UNLICENSED", private=True)},
        "LicenseRef-cidermill-proprietary", False)
    add("package-json-licenses-array", "metadata",
        {"package.json": _pkg(licenses=[{"type": "MIT", "url": "x"}, {"type": "Apache-2.0", "url": "y"}])},
        "MIT OR Apache-2.0", True)
    add("cargo-or", "metadata", {"Cargo.toml": '[package]\nname = "x"\nversion = "0.1.0"\nlicense = "MIT OR Apache-2.0"\n'},
        "MIT OR Apache-2.0", True)
    add("cargo-slash", "metadata", {"Cargo.toml": '[package]\nname = "x"\nlicense = "MIT/Apache-2.0"\n'},
        "MIT OR Apache-2.0", True)
    add("pyproject-pep639", "metadata", {"pyproject.toml": '[project]\nname = "x"\nlicense = "BSD-3-Clause"\n'},
        "BSD-3-Clause", True)
    add("pyproject-classifier", "metadata",
        {"pyproject.toml": '[project]\nname = "x"\nlicense = {text = "MIT License"}\nclassifiers = [\n'
                           '  "Programming Language :: Python :: 3",\n  "License :: OSI Approved :: MIT License",\n]\n'},
        "MIT", True)
    add("setup-cfg-gpl", "metadata", {"setup.cfg": "[metadata]\nname = x\nlicense = GPLv3\nclassifiers =\n"
                                                   "    License :: OSI Approved :: GNU General Public License v3 (GPLv3)\n"},
        "GPL-3.0-only", False)
    add("setup-py-apache", "metadata", {"setup.py": "from setuptools import setup\nsetup(name='x', license='Apache "
                                                    "License 2.0', classifiers=['License :: OSI Approved :: Apache "
                                                    "Software License'])\n"}, "Apache-2.0", True)
    add("pom-apache", "metadata", {"pom.xml": '<project xmlns="http://maven.apache.org/POM/4.0.0"><licenses><license>'
                                              '<name>The Apache Software License, Version 2.0</name><url>https://www.'
                                              'apache.org/licenses/LICENSE-2.0.txt</url></license></licenses></project>'},
        "Apache-2.0", True)
    add("gemspec-mit", "metadata", {"demo.gemspec": 'Gem::Specification.new do |spec|\n  spec.name = "demo"\n'
                                                    '  spec.license = "MIT"\nend\n'}, "MIT", True)
    add("composer-dual", "metadata", {"composer.json": json.dumps({"name": "a/b", "license": ["MIT", "GPL-3.0-or-later"]})},
        "MIT OR GPL-3.0-or-later", True)
    add("r-description-gpl", "metadata", {"DESCRIPTION": "Package: x\nLicense: GPL-3\n"}, "GPL-3.0-only", False)
    add("metadata-agrees-bsd", "metadata", {"LICENSE": text("bsd-new"), "setup.cfg": "[metadata]\nclassifiers =\n"
                                            "    License :: OSI Approved :: BSD License\n"}, "BSD-3-Clause", True)
    add("readme-picks-gpl", "readme", {"COPYING": gpl2, "LICENSE-MIT": mit, "README.md": "# x\n\n## License\n\nThis "
                                       "program is licensed under the GPL-2.0-only license.\n"},
        "GPL-2.0-only", False)
    add("package-json-mit-beside-nc-content", "scoped", {"package.json": _pkg(license="MIT"), "LICENSE.md": "The code is "
                                                         "licensed under the MIT license:\n\n" + mit + "\n\nThe tutorial "
                                                         "texts are licensed under CC BY-NC-SA 4.0.\n"},
        "MIT", True)  # the CC clause names what it covers (the tutorial texts): the code is MIT (issue 38)
    add("copyright-author-list", "other-file", {"LICENSE": mit, "COPYRIGHT": "Copyright holders of this project:\n\n"
                                                "Jane Doe <jane@example.org>\nJohn Roe <john@example.org>\n"},
        "MIT", True)
    add("readme-nc-beside-metadata-mit", "non-commercial",
        {"package.json": _pkg(license="MIT"), "README.md": "# x\n\n## License\n\nMIT, for non-commercial use only.\n"},
        "MIT AND LicenseRef-scancode-proprietary-license", False)  # LicenseDB's key for "non-commercial use only"
    add("setup-py-bsd-only", "ambiguous", {"setup.py": "setup(name='x', license='BSD')\n"},
        f"LicenseRef-cidermill-family-BSD AND {AMB}", False)  # BSD-2/3 keep, BSD-4 does not: which one?
    add("package-json-cc0", "metadata", {"package.json": _pkg(license="CC0")}, "CC0-1.0", True)
    add("npm-isc-beside-mit-file", "metadata", {"LICENSE": mit, "package.json": _pkg(license="ISC")}, "MIT AND ISC",
        True)
    add("metadata-contradicts", "ambiguous", {"COPYING": gpl3, "package.json": _pkg(license="MIT")},
        f"GPL-3.0-only AND MIT AND {AMB}", False)
    add("spdx-headers-only", "headers", {"src/main.py": "# SPDX-License-Identifier: MIT OR Apache-2.0\nx = 1\n"},
        "MIT OR Apache-2.0", True)
    # 4. paths to a wrong keep
    add("classifier-cc-nc-sa", "cc-names", {"setup.py": "setup(name='x', license='Creative Commons Attribution-"
                                                        "NonCommercial-ShareAlike 4.0 International')\n"},
        "CC-BY-NC-SA-4.0", False)
    add("package-json-cc-nc", "cc-names", {"package.json": _pkg(license="CC-BY-NC-4.0")}, "CC-BY-NC-4.0", False)
    add("pyproject-cc-by-nc-text", "cc-names", {"pyproject.toml": '[project]\nname = "x"\nlicense = {text = "CC BY-NC '
                                                                   '4.0"}\n'}, "CC-BY-NC-4.0", False)
    add("classifier-noncommercial", "cc-names", {"setup.cfg": "[metadata]\nclassifiers =\n    License :: Free for "
                                                              "non-commercial use\n"}, NC, False)
    add("code-mit-content-nc", "scoped", {"LICENSE.md": "# License\n\nThe source code in this repository is licensed "
                                          "under the MIT license:\n\n" + mit + "\n\nThe written content and images "
                                          "(docs/, assets/) are licensed under the Creative Commons Attribution-"
                                          "NonCommercial 4.0 International License (CC BY-NC 4.0).\n"},
        "MIT", True)  # content and images under CC BY-NC, the code under MIT (issue 38)
    add("license-license-nc", "spurious-mit", {"LICENSE": "Acme Non-Commercial License\n\nLicense\n\nLicense. Subject "
                                               "to the terms below, Acme grants you a license license to use, copy and "
                                               "modify the software for non-commercial purposes only. Commercial use "
                                               "requires a separate agreement. The MIT-style disclaimer applies: THE "
                                               "SOFTWARE IS PROVIDED AS IS, WITHOUT WARRANTY OF ANY KIND.\n"}, NC, False)
    add("polyform-noncommercial", "non-commercial", {"LICENSE.md": text("polyform-noncommercial-1.0.0")},
        "PolyForm-Noncommercial-1.0.0", False)
    add("mit-plus-nc-clause", "non-commercial", {"LICENSE": mit + "\n\nThe Software may not be used for commercial "
                                                 "purposes without written permission.\n"}, f"MIT AND {NC}", False)
    add("apache-commons-clause", "non-commercial", {"LICENSE": text("commons-clause") + "\n\n" + apache},
        "Apache-2.0 AND LicenseRef-scancode-commons-clause", False)
    add("mit-or-polyform-nc", "non-commercial", {"LICENSE-MIT": mit, "LICENSE-NONCOMMERCIAL": text(
        "polyform-noncommercial-1.0.0")}, "MIT OR PolyForm-Noncommercial-1.0.0", True)
    add("all-rights-reserved", "reserved", {"LICENSE": "Copyright (c) 2022 Acme Corporation.\nAll rights reserved.\n",
                                            "README.md": "# acme\n\nInternal tool.\n"},
        "LicenseRef-cidermill-all-rights-reserved", False)
    add("mit-military-use", "field-of-use", {"LICENSE": mit + "\n\nThe Software shall not be used for military "
                                             "purposes.\n"}, f"MIT AND {FIELD}", False)
    add("research-only", "field-of-use", {"LICENSE": "Copyright 2024 Example University.\n\nPermission is granted to "
                                          "use, copy and modify this software for academic and research purposes only, "
                                          "provided this notice is kept.\n"}, FIELD, False)
    add("json-license", "field-of-use", {"LICENSE": text("json")}, "JSON", False)
    add("cc-by-nd", "no-derivatives", {"LICENSE": text("cc-by-nd-4.0")}, "CC-BY-ND-4.0", False)
    add("cc-by-sa", "share-alike", {"LICENSE": text("cc-by-sa-4.0")}, "CC-BY-SA-4.0", False)
    # exceptions, uncertainty
    add("gpl-classpath", "with", {"LICENSE": gpl2 + "\n\n" + text("classpath-exception-2.0")},
        "GPL-2.0-only WITH Classpath-exception-2.0", False)
    add("unreadable-license", "ambiguous", {"LICENSE": "Acme Software License\n\nYou can use this software in any "
                                            "way you see fit as long as you keep this notice and tell us about it. "
                                            "Acme takes no responsibility for what happens.\n"}, "unknown", False)
    add("unreadable-beside-mit", "ambiguous", {"LICENSE-MIT": mit, "LICENSE-EXTRA": "Acme Extra Terms\n\nThese extra "
                                               "terms bind every user of the binaries we publish, including updates "
                                               "and plugins, until further notice from Acme.\n"}, f"MIT AND {AMB}", False)
    return c
