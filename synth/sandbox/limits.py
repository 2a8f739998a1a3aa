"""What a sandboxed program may use, and the verdicts a run can end with."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum

from manifests.config import require


class Verdict(str, Enum):
    """How a whole program's process ended (`Sandbox.run`). The program itself can fake its exit
    status, so this is an outcome, not a test verdict: for that use `Sandbox.judge`."""
    PASSED = "passed"      # exited 0
    FAILED = "failed"      # an exception (AssertionError, NameError, ...) ended it, or it exited non-zero
    TIMEOUT = "timeout"    # CPU seconds or wall-clock seconds ran out
    MEMORY = "memory"      # MemoryError, or the memory cgroup killed it (tmpfs, memfd, heap)
    CRASHED = "crashed"    # killed by a signal (segfault, abort, ...)
    BLOCKED = "blocked"    # more output than kill_output_bytes: killed


@dataclass(frozen=True, kw_only=True)
class SandboxLimits:
    cpu_seconds: int = 5                   # RLIMIT_CPU (soft; the hard limit is one second more)
    wall_seconds: float = 10.0             # killed (whole process tree) after this
    memory_bytes: int = 512 * 1024**2      # RLIMIT_AS
    max_processes: int = 32                # RLIMIT_NPROC for the sandbox's own uid
    max_file_bytes: int = 16 * 1024**2     # RLIMIT_FSIZE: largest file it may write
    max_open_files: int = 64               # RLIMIT_NOFILE
    max_output_bytes: int = 64 * 1024      # stdout/stderr kept (each); the rest is counted, not stored
    kill_output_bytes: int = 4 * 1024**2   # more output than this: killed, verdict blocked (output_limit)
    scratch_bytes: int = 64 * 1024**2      # size of the /scratch tmpfs (memory; counted by the cgroup)
    tmp_bytes: int = 16 * 1024**2          # size of the /tmp tmpfs
    shm_bytes: int = 16 * 1024**2          # size of the /dev/shm tmpfs
    max_message_bytes: int = 8 * 1024**2   # one protocol line (a call's arguments or its return value)

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            require(value > 0, f"{name} must be > 0; got {value} in SandboxLimits")
        require(self.kill_output_bytes >= self.max_output_bytes,
                "kill_output_bytes must be >= max_output_bytes in SandboxLimits")
        require(self.memory_bytes >= 64 * 1024**2,
                f"memory_bytes must be >= 64MiB (Python itself needs ~30MiB); got {self.memory_bytes}")

    def to_dict(self) -> dict:
        return asdict(self)

    def child_dict(self, *, nproc: int) -> dict:
        """What the sandboxed process applies to itself."""
        return {**asdict(self), "nproc": nproc}


@dataclass
class SandboxResult:
    verdict: Verdict
    reason: str = ""                  # e.g. "network", "write outside scratch", "AssertionError: ..."
    stdout: str = ""
    stderr: str = ""
    stdout_bytes: int = 0             # total produced (stdout/stderr above are capped)
    stderr_bytes: int = 0
    exit_code: int | None = None
    wall_seconds: float = 0.0
    isolation: str = ""               # bwrap | unshare | rlimits
    blocked_events: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASSED

    @property
    def truncated(self) -> bool:
        return len(self.stdout.encode()) < self.stdout_bytes or len(self.stderr.encode()) < self.stderr_bytes
