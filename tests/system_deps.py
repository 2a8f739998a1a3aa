"""What the tests need from the system, and what a missing piece does to them.

The Debian packages are listed once, in requirements/system/debian.txt, and installed by `make install`
(root with apt-get). Where one still cannot be had (no root), the tests that need it skip with a reason that
names the package and the command; under CI (CI=true), where `make` must have installed it, they fail, so a
test that cannot check what it is for never passes quietly there.
"""

from __future__ import annotations

import os

import pytest

FIX = {
    "bwrap": "install the Debian package bubblewrap (`make install` does it as root; "
             "else apt-get install -y bubblewrap)",
    "unshare": "needs root and util-linux's unshare",
}


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def missing(reason: str) -> None:
    """Skip the calling test with `reason`; fail it under CI."""
    if under_ci():
        pytest.fail(f"{reason} (CI=true: the system packages must be installed by `make install`)")
    pytest.skip(reason)


def require_isolation(level: str) -> None:
    """The sandbox isolation `level` works here, or the test skips (fails under CI) saying what is missing."""
    from synth.sandbox import available

    if not available(level):
        missing(f"sandbox isolation level {level!r} does not work here: {FIX.get(level, '')}")


def require_some_isolation() -> None:
    """A strong isolation level (bubblewrap or namespaces) works here, as `Sandbox()` with defaults needs."""
    from synth.sandbox import available

    if not (available("bwrap") or available("unshare")):
        missing(f"no sandbox isolation works here: {FIX['bwrap']}, or run as root")


def require_chromium() -> str:
    """The path of a Chromium binary (Debian's `chromium`), or the test skips (fails under CI)."""
    import shutil

    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    missing("no Chromium here: install the Debian package chromium (`make install` does it as root; else "
            "apt-get install -y chromium)")
    return ""
