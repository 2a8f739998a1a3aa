"""The install story: extras read the requirements files, package data ships in the wheel."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_extra_all_names_every_requirements_file():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    extras = project["tool"]["setuptools"]["dynamic"]["optional-dependencies"]
    files = {f"requirements/{p.name}" for p in (REPO / "requirements").glob("*.txt")} - {"requirements/gpu.txt"}
    assert set(extras["all"]["file"]) == files
    for name in ("web", "code", "math", "synth", "train", "ray", "test", "all"):
        assert all((REPO / f).is_file() for f in extras[name]["file"]), name
    assert "optional-dependencies" in project["project"]["dynamic"]


def test_every_resource_folder_carries_its_license_and_source():
    """Third-party data shipped inside the packages: each folder of data files has a LICENSE (or a
    README with the license) and a SOURCE.txt or README naming where it came from. The project's own
    lists (first line a `#` comment saying what they are) need neither."""
    def third_party(p: Path) -> bool:
        return p.suffix != ".txt" or not p.read_text(encoding="utf-8", errors="replace").startswith("# ")

    folders = {p.parent for pkg in ("corpus", "synth", "manifests", "training", "evals")
               for p in (REPO / pkg).rglob("*") if p.is_file() and p.suffix in (".zst", ".tex", ".xsl", ".txt")
               and "data" in p.relative_to(REPO).parts and p.name not in ("SOURCE.txt",) and third_party(p)}
    assert len(folders) >= 20
    for d in folders:
        names = {p.name for p in d.iterdir()}
        assert names & {"LICENSE", "README"}, d
        assert names & {"SOURCE.txt", "README", "README.md"}, d
