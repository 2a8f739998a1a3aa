"""Issue 38: license decisions per file, on small repositories built here and read as a pipeline reads them
(repos reader -> code_license_v1). Each test asserts the exact rows kept and dropped, their license and the
evidence a user sees (`license_evidence` on kept rows, `drop_detail` JSON on rejects). License texts are the
real ones from the installed LicenseDB (evals/data/_license_cases.py `text`)."""

from __future__ import annotations

import json

import pytest

from corpus.readers import InputFile, make_reader
from corpus.registry import stage_class
from evals.data._license_cases import text
from manifests.storage import Location


def _repo(tmp_path, files: dict[str, str]):
    for path, body in files.items():
        f = tmp_path / "repo" / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(body)
    return tmp_path / "repo"


def _run(root) -> tuple[dict, dict]:
    """{path: kept row}, {path: reject row with its drop_detail parsed}."""
    reader = make_reader("repos", {"repo_depth": 0})
    stage = stage_class("code_license_v1")({})
    kept, dropped = {}, {}
    for table in reader.read(InputFile(Location.parse(str(root)), "in"), batch_rows=3, on_record_error=print):
        result = stage(table)
        kept.update({r["path"]: r for r in result.table.to_pylist()})
        for r in (result.rejects.to_pylist() if result.rejects is not None else []):
            dropped[r["source"].split(":", 1)[1]] = {**r, "detail": json.loads(r["drop_detail"])}
    return kept, dropped


def _mit(holder: str = "2024 Example Lab") -> str:
    return text("mit").replace("Permission is hereby", f"MIT License\n\nCopyright (c) {holder}\n\nPermission is hereby", 1)


def test_reuse_headers_decide_each_file_and_the_package_and_stays_and(tmp_path):
    root = _repo(tmp_path, {
        "pyproject.toml": '[project]\nname = "x"\nlicense = "Apache-2.0 AND CC0-1.0 AND CC-BY-SA-4.0 AND GPL-3.0-or-later"\n',
        "LICENSES/Apache-2.0.txt": text("apache-2.0"), "LICENSES/CC0-1.0.txt": text("cc0-1.0"),
        "LICENSES/CC-BY-SA-4.0.txt": text("cc-by-sa-4.0"), "LICENSES/GPL-3.0-or-later.txt": text("gpl-3.0"),
        "REUSE.toml": 'version = 1\n\n[[annotations]]\npath = "docs/**"\nSPDX-License-Identifier = "CC-BY-SA-4.0"\n',
        "src/pkg/core.py": "# SPDX-FileCopyrightText: 2024 Jane\n# SPDX-License-Identifier: GPL-3.0-or-later\n\nX = 1\n",
        "src/pkg/util.py": "# SPDX-License-Identifier: Apache-2.0\n\nY = 2\n",
        "src/pkg/plain.py": "Z = 3\n", "docs/index.md": "# Docs\n"})
    kept, dropped = _run(root)
    package = "Apache-2.0 AND CC-BY-SA-4.0 AND CC0-1.0 AND GPL-3.0-or-later"
    assert (kept["src/pkg/util.py"]["license"], kept["src/pkg/util.py"]["license_method"]) == ("Apache-2.0", "spdx-header")
    core = dropped["src/pkg/core.py"]
    assert core["drop_reason"] == "license:GPL-3.0-or-later"
    assert {k: core["detail"][k] for k in ("expression", "rule", "source")} == \
        {"expression": "GPL-3.0-or-later", "rule": "spdx-header", "source": "src/pkg/core.py"}
    assert core["detail"]["repository"]["expression"] == package  # AND, never read as a choice
    assert core["detail"]["repository"]["decided_by"] == ["pyproject.toml"]
    plain = dropped["src/pkg/plain.py"]  # no header of its own: the package's expression, all of it
    assert plain["drop_reason"] == f"license:{package}" and plain["detail"]["rule"] == "repository"
    assert dropped["docs/index.md"]["detail"] | {"repository": None} == {
        "file": "docs/index.md", "expression": "CC-BY-SA-4.0", "rule": "reuse-toml", "source": "REUSE.toml[0]",
        "repository": None}


def test_bsd_text_with_a_preface_is_not_ambiguous(tmp_path):
    preface = ("The project is released under the terms below. Contributors agree that their contributions are "
               "licensed under the same terms.\n\nCopyright (c) 2019, The Authors\nAll rights reserved.\n\n")
    kept, dropped = _run(_repo(tmp_path, {"pyproject.toml": '[project]\nname = "x"\nlicense = "BSD-3-Clause"\n',
                                          "LICENSE": preface + text("bsd-new"), "src/x.py": "x = 1\n"}))
    assert not dropped and kept["src/x.py"]["license"] == "BSD-3-Clause"
    assert "LICENSE*=BSD-3-Clause (own, dice" in kept["src/x.py"]["license_evidence"]


def test_statement_only_license_pointing_to_two_texts_agrees_with_the_metadata(tmp_path):
    statement = ("This program and the accompanying materials are made available under the terms of the Eclipse "
                 "Public License v. 2.0, which is available in LICENSE-EPL, or the Eclipse Distribution License "
                 "v. 1.0, which is available in LICENSE-EDL.\n")
    edl = "Eclipse Distribution License - v 1.0\n\nCopyright (c) 2007, Eclipse Foundation, Inc.\n\n" + text("bsd-new")
    kept, dropped = _run(_repo(tmp_path, {
        "pyproject.toml": '[project]\nname = "x"\nlicense = "EPL-2.0 OR BSD-3-Clause"\n', "LICENSE": statement,
        "LICENSE-EPL": text("epl-2.0"), "LICENSE-EDL": edl, "src/x.py": "x = 1\n"}))
    assert not dropped and kept["src/x.py"]["license"] == "EPL-2.0 OR BSD-3-Clause"
    assert "LICENSE says how the license files combine" in kept["src/x.py"]["license_evidence"]


def test_perl_distribution_under_the_terms_of_perl_itself(tmp_path):
    perl = ("This software is copyright (c) 2020 by Jane Doe.\n\nThis is free software; you can redistribute it "
            "and/or modify it under\nthe same terms as the Perl 5 programming language system itself.\n\n"
            "Terms of the Perl programming language system itself\n\na) the GNU General Public License as "
            "published by the Free\n   Software Foundation; either version 1, or (at your option) any\n   later "
            "version, or\nb) the \"Artistic License\"\n\n--- The GNU General Public License, Version 1, February "
            "1989 ---\n\n" + text("gpl-1.0") + "\n\n--- The Artistic License 1.0 ---\n\n" + text("artistic-perl-1.0"))
    kept, dropped = _run(_repo(tmp_path, {"META.json": json.dumps({"name": "Foo-Bar", "license": ["perl_5"]}),
                                          "LICENSE": perl, "lib/Foo/Bar.pm": "package Foo::Bar;\n1;\n"}))
    assert not dropped
    row = kept["lib/Foo/Bar.pm"]
    assert row["license"] == "Artistic-1.0-Perl OR GPL-1.0-or-later"
    assert "META.json*=Artistic-1.0-Perl OR GPL-1.0-or-later (declared, metadata:license)" in row["license_evidence"]


def test_a_weights_license_covers_the_weights_not_the_code(tmp_path):
    kept, dropped = _run(_repo(tmp_path, {
        "LICENSE": _mit(), "LICENSE_weights": text("cc-by-nc-4.0"),
        "README.md": "# model\n\n## License\n\nThe code is released under the MIT license. The model weights are "
                     "released under CC BY-NC 4.0 (see LICENSE_weights).\n",
        "train.py": "import json\n", "weights/config.json": "{}\n"}))
    assert kept["train.py"]["license"] == "MIT" and "weights (not the code)=CC-BY-NC-4.0" in kept["train.py"]["license_evidence"]
    assert list(dropped) == ["weights/config.json"]  # a file of the weights: their license
    assert dropped["weights/config.json"]["detail"]["rule"] == "artifact"
    assert dropped["weights/config.json"]["drop_reason"] == "license:CC-BY-NC-4.0"


def test_every_reject_carries_its_evidence(tmp_path):
    kept, dropped = _run(_repo(tmp_path, {"COPYING": text("gpl-3.0"), "package.json": '{"license": "MIT"}',
                                          "index.js": "module.exports = 1;\n"}))
    assert not kept
    row = dropped["index.js"]
    assert row["drop_reason"] == "license:ambiguous"  # the files and the metadata disagree
    detail = row["detail"]
    assert detail["rule"] == "repository" and detail["repository"]["files"] == {
        "COPYING": "GPL-3.0-only", "package.json": "MIT"}
    assert "disagree" in detail["repository"]["how"]
    assert all(r["detail"]["expression"] for r in dropped.values())


def test_reuse_toml_precedence_dep5_and_sidecars(tmp_path):
    root = _repo(tmp_path, {
        "LICENSE": _mit(),
        "REUSE.toml": ('version = 1\n\n[[annotations]]\npath = "vendor/**"\nprecedence = "override"\n'
                       'SPDX-License-Identifier = "GPL-2.0-only"\n\n[[annotations]]\npath = "gen/*.py"\n'
                       'precedence = "aggregate"\nSPDX-License-Identifier = "CC0-1.0"\n'),
        "vendor/lib.py": "# SPDX-License-Identifier: MIT\nA = 1\n",  # override: the annotation wins
        "gen/a.py": "# SPDX-License-Identifier: MIT\nB = 2\n",  # aggregate: both apply
        "img/logo.svg": "<svg/>\n", "img/logo.svg.license": "SPDX-License-Identifier: CC-BY-NC-4.0\n",
        "main.py": "C = 3\n"})
    kept, dropped = _run(root)
    assert (dropped["vendor/lib.py"]["drop_reason"], dropped["vendor/lib.py"]["detail"]["rule"]) == \
        ("license:GPL-2.0-only", "reuse-toml")
    assert (kept["gen/a.py"]["license"], kept["gen/a.py"]["license_method"]) == ("CC0-1.0 AND MIT", "spdx-header+reuse-toml")
    assert dropped["img/logo.svg"]["detail"]["rule"] == "reuse-sidecar"
    assert kept["main.py"]["license"] == "MIT"
    dep5 = _repo(tmp_path / "d", {"LICENSE": _mit(), ".reuse/dep5": (
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
        "Files: third/*\nCopyright: 2020 Other\nLicense: LGPL-2.1-or-later\n"), "third/x/y.c": "int y;\n",
        "z.c": "int z;\n"})
    kept, dropped = _run(dep5)
    assert dropped["third/x/y.c"]["detail"]["rule"] == "dep5" and kept["z.c"]["license"] == "MIT"


def test_folder_licenses_by_file_and_by_statement(tmp_path):
    root = _repo(tmp_path, {
        "LICENSE": ("This repository uses 2 different licenses:\n- all files in the `lib` directory use a BSD "
                    "2-Clause license\n- all other files use a GPL-2.0-or-later license\n"),
        "lib/LICENSE": text("bsd-simplified"), "lib/a.c": "int a;\n", "programs/b.c": "int b;\n",
        "ee/LICENSE": "Acme Enterprise License\n\nThis software may only be used in production with a valid Acme "
                      "subscription. You may not copy, distribute or sell it.\n", "ee/c.c": "int c;\n"})
    kept, dropped = _run(root)
    assert (kept["lib/a.c"]["license"], kept["lib/a.c"]["license_method"]) == ("BSD-2-Clause", "folder")
    assert dropped["programs/b.c"]["detail"]["expression"].startswith("GPL-2.0-or-later")
    assert (dropped["ee/c.c"]["detail"]["rule"], dropped["ee/c.c"]["detail"]["source"]) == ("folder", "ee/LICENSE")


def test_a_license_notice_can_make_a_file_stricter_never_looser(tmp_path):
    kept, dropped = _run(_repo(tmp_path, {
        "LICENSE": _mit(), "tools/dfu.py": "#!/usr/bin/env python\n# Distributed under the terms of the GNU Lesser "
                                          "General Public License, version 3.0.\nimport sys\n",
        "ok.py": "# Licensed under the MIT license and the BSD license.\nimport os\n"}))
    assert dropped["tools/dfu.py"]["detail"]["rule"] == "repository+notice"
    assert "LGPL-3.0" in dropped["tools/dfu.py"]["detail"]["expression"]
    assert kept["ok.py"]["license"] == "MIT"  # permissive names in a notice change nothing


@pytest.mark.parametrize("value, want", [
    ("Apache-2.0 AND CC0-1.0 AND CC-BY-SA-4.0 AND GPL-3.0-or-later", "Apache-2.0 AND CC-BY-SA-4.0 AND CC0-1.0 AND GPL-3.0-or-later"),
    ("MIT OR Apache-2.0", "MIT OR Apache-2.0"), ("CC-BY-SA-4.0 AND MIT", "CC-BY-SA-4.0 AND MIT")])
def test_spdx_expressions_in_metadata_keep_their_operators(value, want):
    from corpus.code.license_expr import same_expression
    from corpus.code.license_file import name_expression

    assert same_expression(name_expression(value), want)
