"""License detection on real license files: licensee's fixtures, code_licensed repositories, SPDX tags."""

from __future__ import annotations

import pytest

from corpus.code.license import (PERMISSIVE, detect_repository, is_allowed, is_license_file, parse_expression,
                                 readme_license_section)


@pytest.fixture
def index(shared_data):
    from corpus.code.license_index import load_index

    return load_index()  # the licensedcode-data package; first build ~30 s, then cached (disk and process)


def _detect(files: dict[str, bytes], index, sources=None):
    text = {p: b.decode("utf-8", "replace") for p, b in files.items()}
    return detect_repository(list(text), text.__getitem__, index=index, source_paths=sources or [])


@pytest.mark.slow
def test_licensee_fixtures_accuracy_at_least_95_percent(shared_data, index):
    from evals.data.license import licensee_fixtures, licensee_key

    known = {p.stem for p in (shared_data / "licenses/licensee/vendor/choosealicense.com/_licenses").glob("*.txt")}
    cases = licensee_fixtures(shared_data / "licenses")
    correct = [licensee_key(_detect(files, index), known) == want for _, files, want in cases]
    assert len(cases) == 64
    assert sum(correct) / len(cases) >= 0.95


@pytest.mark.slow
def test_code_licensed_repositories_get_their_exact_license(shared_data, index):
    from evals.data.license import code_licensed_repos, same_expression

    repos = code_licensed_repos(shared_data / "code_licensed")
    got = {repo: _detect(files, index, sources).expression for repo, (files, sources, _) in repos.items()}
    assert got["htop-dev/htop"] == "GPL-2.0-or-later"  # GPL-2.0 text + "GPLv2+" headers
    assert got["ranger/ranger"] == "GPL-3.0-only"
    assert same_expression(got["BurntSushi/ripgrep"], "Unlicense OR MIT")
    for repo, (_, _, want) in repos.items():
        assert same_expression(got[repo], want), repo


def test_modified_and_multiple_licenses_are_not_passed_off_as_one(shared_data, index):
    fixtures = shared_data / "licenses/licensee/spec/fixtures"
    for name in ("pixar-modified-apache", "wrk-modified-apache", "fcpl-modified-mpl"):
        files = {p.name: p.read_bytes() for p in (fixtures / name).iterdir()}
        assert _detect(files, index).expression not in ("Apache-2.0", "MPL-2.0"), name
    files = {p.name: p.read_bytes() for p in (fixtures / "multiple-license-files").iterdir()}
    assert _detect(files, index).expression in ("MPL-2.0 OR MIT", "MIT OR MPL-2.0")  # separate files: alternatives


def test_spdx_tags_and_readme_section_and_nothing(index):
    headers = {"src/a.c": b"// SPDX-License-Identifier: Apache-2.0 OR MIT\nint a;\n",
               "src/b.c": b"/* SPDX-License-Identifier: Apache-2.0 OR MIT */\nint b;\n"}
    det = _detect(headers, index, sources=["src/a.c", "src/b.c"])
    assert (det.expression, det.status) == ("Apache-2.0 OR MIT", "matched")
    readme = b"# Tool\n\nDoes things.\n\n## License\n\nLicensed under the Apache License, Version 2.0.\n\n## Usage\nrun it\n"
    assert _detect({"README.md": readme}, index).expression == "Apache-2.0"
    none = _detect({"main.py": b"print(1)\n"}, index, sources=["main.py"])
    assert (none.expression, none.status) == ("unknown", "none")
    empty = _detect({"LICENSE": b"\n"}, index)
    assert (empty.expression, empty.status) == ("unknown", "unmatched")


def test_license_file_names_and_readme_sections():
    assert all(map(is_license_file, ["LICENSE", "LICENSE.md", "COPYING.lesser", "UNLICENSE", "LICENSES/MIT.txt",
                                     "license.html", "LICENSE-MIT", "COPYRIGHT.md", "PATENTS"]))
    assert not any(map(is_license_file, ["src/LICENSE", "license.py", "licenses.go", "README.md"]))
    text = "Intro\n=====\nhi\n\nLicense\n-------\nMIT, see LICENSE\n\nCredits\n-------\nme\n"
    assert readme_license_section(text).strip() == "MIT, see LICENSE"


def test_expressions_against_the_permissive_set():
    assert parse_expression("MIT OR (Apache-2.0 AND BSD-3-Clause)") == \
        ("OR", ["MIT", ("AND", ["Apache-2.0", "BSD-3-Clause"])])
    assert is_allowed("Unlicense OR MIT", PERMISSIVE)
    assert is_allowed("MIT OR GPL-2.0-only", PERMISSIVE)
    assert not is_allowed("MIT AND GPL-2.0-only", PERMISSIVE)
    assert is_allowed("Apache-2.0 WITH LLVM-exception", PERMISSIVE)
    assert is_allowed("CC-BY-4.0", PERMISSIVE) and not is_allowed("CC-BY-SA-4.0", PERMISSIVE)
    assert is_allowed("BSD-3-Clause-Clear", PERMISSIVE) and is_allowed("Artistic-2.0", PERMISSIVE)
    assert not is_allowed("unknown", PERMISSIVE) and not is_allowed("MIT AND unknown", PERMISSIVE)
    assert not is_allowed("CC-BY-NC-4.0", PERMISSIVE)


def test_index_is_cached_by_source_hash(shared_data, index, tmp_path, monkeypatch):
    from corpus.code import license_index

    files = list((license_index.cache_dir("license-index")).glob("*.pkl"))
    assert files, "the built index is cached"
    assert license_index.load_index() is index  # in-process cache
