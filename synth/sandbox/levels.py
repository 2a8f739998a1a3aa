"""Which isolation levels work on this machine (each probed once with a real child) and which one a
sandbox uses. Apart from isolation.py, which only builds command lines, because the probe starts a child
through process.py, which needs those command lines."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import time

from manifests.errors import ConfigError

from . import isolation
from .limits import SandboxLimits
from .process import BASE_UID, spawn


def _probe(level: str) -> bool:
    """Run one real child (the program role) under the level; any failure means unusable here."""
    if level == "bwrap" and not shutil.which("bwrap"):
        return False
    if level == "unshare" and (os.geteuid() != 0 or not shutil.which("unshare")):
        return False
    try:
        isolation.sandbox_python()
        child = spawn(level, "program", {"source": "import os\nos.listdir('.')"}, SandboxLimits(wall_seconds=20),
                      uid=BASE_UID + 999, nonce="", cgroup=None)
        if isinstance(child, str):
            return False
        child.drain(time.monotonic() + 20)
        return child.close(grace=1) == 0
    except (OSError, ConfigError, subprocess.SubprocessError):
        return False


@functools.lru_cache(maxsize=None)
def available(level: str) -> bool:
    return _probe(level)


def choose(requested: str = "auto", *, allow_weak_isolation: bool = False) -> str:
    if requested not in ("auto", *isolation.LEVELS):
        raise ConfigError(f"isolation must be 'auto' or one of {list(isolation.LEVELS)}; got {requested!r}")
    if requested == "rlimits" and not allow_weak_isolation:
        raise ConfigError("isolation 'rlimits' runs untrusted code without namespaces (host files and network "
                          "reachable); it needs allow_weak_isolation: true")
    if requested == "auto":
        for level in isolation.STRONG:
            if available(level):
                return level
        if allow_weak_isolation:
            return "rlimits"
        raise ConfigError("no real isolation works on this machine: install bubblewrap (apt-get install "
                          "bubblewrap) or run as root with util-linux unshare; or set allow_weak_isolation: true "
                          "to run with rlimits only (recorded on every result)")
    if not available(requested):
        fix = {"bwrap": "install the Debian package `bubblewrap` (apt-get install bubblewrap)",
               "unshare": "run as root with util-linux's unshare"}.get(requested, "")
        raise ConfigError(f"sandbox isolation {requested!r} does not work on this machine; {fix}")
    return requested
