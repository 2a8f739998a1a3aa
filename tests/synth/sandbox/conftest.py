"""Sandboxes at each real isolation level this machine has (bubblewrap, namespaces)."""

from __future__ import annotations

import pytest

from synth.sandbox import Sandbox, SandboxLimits
from tests.system_deps import require_isolation

LIMITS = SandboxLimits(cpu_seconds=3, wall_seconds=8, memory_bytes=192 * 1024**2, max_processes=16,
                       max_output_bytes=4096, kill_output_bytes=1024**2, scratch_bytes=32 * 1024**2,
                       tmp_bytes=8 * 1024**2, shm_bytes=8 * 1024**2, max_message_bytes=256 * 1024)
LEVELS = ["bwrap", "unshare"]


@pytest.fixture(scope="module", params=LEVELS)
def box(request):
    """One sandbox per level. A missing level skips naming the package to install, and fails under CI
    (`make install` installs bubblewrap as root): a test that cannot check isolation never passes quietly."""
    require_isolation(request.param)
    with Sandbox(LIMITS, isolation_level=request.param, max_workers=2) as sb:
        yield sb
