"""`make install`'s system step (requirements/system/install.sh): what it does when a package is missing.

The package manager and the user id are stubs here (a unit test of the script's logic); the real install is
what `.ci/run` and a fresh `make test` exercise.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import REPO

SCRIPT = REPO / "requirements" / "system" / "install.sh"


def listed() -> list[str]:
    words = []
    for line in (REPO / "requirements" / "system" / "debian.txt").read_text().splitlines():
        words += line.split("#", 1)[0].split()
    return words


def stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def run(tmp_path: Path, *, uid: int, installed: bool, apt_ok: bool = True) -> tuple[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "apt.log"
    status = "install ok installed" if installed else "deinstall ok config-files"
    stub(bin_dir, "dpkg-query", f"printf '{status}'")
    stub(bin_dir, "id", f"echo {uid}")
    stub(bin_dir, "apt-get", f'echo "$@" >> {log}\nexit {0 if apt_ok else 100}')
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    out = subprocess.run(["sh", str(SCRIPT)], env=env, capture_output=True, text=True, check=True).stdout
    return out, log.read_text() if log.exists() else ""


def test_the_list_names_bubblewrap_for_the_sandbox():
    assert "bubblewrap" in listed()


def test_nothing_happens_when_every_package_is_there(tmp_path):
    assert run(tmp_path, uid=0, installed=True) == ("", "")


def test_root_installs_the_missing_packages_with_apt(tmp_path):
    out, apt = run(tmp_path, uid=0, installed=False)
    assert out == f"cidermill: installing system packages: {' '.join(listed())}\n"
    assert apt.splitlines() == ["update -qq", f"install -y -qq --no-install-recommends {' '.join(listed())}"]


def test_without_root_one_line_names_the_command_and_make_goes_on(tmp_path):
    out, apt = run(tmp_path, uid=1000, installed=False)
    pkgs = " ".join(listed())
    assert out == f"cidermill: missing system packages: {pkgs}; run: sudo apt-get install -y {pkgs}\n"
    assert apt == ""


def test_a_failed_apt_says_so_and_make_goes_on(tmp_path):
    out, _ = run(tmp_path, uid=0, installed=False, apt_ok=False)
    assert out.splitlines()[-1].startswith(f"cidermill: apt-get could not install {' '.join(listed())}")


def test_ci_installs_system_packages_only_through_make():
    ci = (REPO / ".ci" / "run").read_text()
    assert "apt-get" not in ci and "make test" in ci
    makefile = (REPO / "Makefile").read_text()
    assert "requirements/system/install.sh" in makefile and "install: system" in makefile
