"""How a sandboxed process is isolated on this machine, and the command line that starts it.

Levels, best first; `isolation="auto"` picks the best that works and never falls to `rlimits`
by itself (fails closed):
- bwrap:   bubblewrap (Debian package `bubblewrap`) run as an unprivileged uid: new user, pid, net,
           ipc, uts and cgroup namespaces; a root holding only /usr (read-only), this pid
           namespace's /proc, a few device nodes and size-limited tmpfs for /scratch, /tmp and
           /dev/shm; no capabilities, no nested user namespaces.
- unshare: util-linux `unshare` (needs root): new mount, pid, net, ipc and uts namespaces; the child
           builds the same kind of root itself (child.py `_build_root`), detaches the host's, then
           drops to the sandbox uid with no_new_privs.
- rlimits: no namespaces: rlimits, a scrubbed environment and (as root) an unprivileged uid. The
           host file system and network are reachable. Only with `allow_weak_isolation=True`, and
           every result says so.

Both namespace levels also put the process tree into a memory cgroup (v2 `memory.max` or v1
`memory.limit_in_bytes` + `memsw`) when this machine lets us create one, so tmpfs, memfd and SysV
shared memory count against the memory limit; `memory_accounting()` says which is in force.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from manifests.errors import ConfigError

LEVELS = ("bwrap", "unshare", "rlimits")
STRONG = ("bwrap", "unshare")
PYTHON = "/usr/bin/python3"   # the system CPython: stdlib only, under the read-only /usr


def sandbox_python() -> str:
    for candidate in (PYTHON, "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    raise ConfigError("the sandbox needs a system python3 (/usr/bin/python3); install the Debian package python3")


def bwrap_command(python: str, argv: list[str], env: dict[str, str], limits: dict, *,
                  die_with_parent: bool = True) -> list[str]:
    # --die-with-parent's signal follows the *thread* that started bwrap: right for a process that
    # lives within one judgement (its thread outlives it), wrong for the tests server that several
    # judgements share; that one exits on EOF of its request pipe when the parent is gone.
    cmd = ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--new-session", "--as-pid-1",
           *(["--die-with-parent"] if die_with_parent else []),
           "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = f"/{top}"
        if os.path.islink(host):
            cmd += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            cmd += ["--ro-bind", host, host]
    cmd += ["--proc", "/proc", "--dev", "/dev"]
    for path, size in (("/dev/shm", limits["shm_bytes"]), ("/scratch", limits["scratch_bytes"]),
                       ("/tmp", limits["tmp_bytes"])):
        cmd += ["--size", str(int(size)), "--perms", "0700", "--tmpfs", path]
    cmd += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/scratch", "--clearenv"]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    return cmd + [python, *argv]


def unshare_command(python: str, argv: list[str]) -> list[str]:
    return ["unshare", "--mount", "--net", "--ipc", "--uts", "--pid", "--fork", "--kill-child",
            "--propagation", "private", "--", python, *argv]


def drop_to(uid: int, cmd: list[str]) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *cmd]


def in_cgroup(procs_file: str, cmd: list[str]) -> list[str]:
    """Join the cgroup first (as root), then exec the rest: everything it starts is inside."""
    return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', procs_file, *cmd]


# -- memory cgroups ---------------------------------------------------------------------------------

def _own_cgroup_dirs() -> list[tuple[str, Path]]:
    """(version, directory where we may create children), best first."""
    out = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        hid, controllers, path = line.split(":", 2)
        if hid == "0":
            for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                d = Path(mount + path)
                ctl = Path(mount) / "cgroup.controllers"
                if ctl.exists() and "memory" in ctl.read_text().split():
                    out.insert(0, ("v2", d))
        elif "memory" in controllers.split(","):
            out.append(("v1", Path("/sys/fs/cgroup/memory" + path)))
    return out


class MemoryCgroup:
    """One cgroup per sandbox slot, reused across its runs, removed by `close`."""

    def __init__(self, version: str, path: Path, limit: int):
        self.version, self.path, self.limit = version, path, limit

    @classmethod
    def create(cls, name: str, limit: int) -> "MemoryCgroup | None":
        if os.geteuid() != 0:
            return None
        for version, parent in _own_cgroup_dirs():
            _sweep(parent)
            path = parent / name
            try:
                if version == "v2":
                    sub = parent / "cgroup.subtree_control"
                    if "memory" not in sub.read_text().split():
                        sub.write_text("+memory")
                path.mkdir(exist_ok=True)
                cg = cls(version, path, limit)
                cg.set_limit(limit)
                return cg
            except OSError:
                try:
                    path.rmdir()
                except OSError:
                    pass
        return None

    def set_limit(self, limit: int) -> None:
        self.limit = limit
        if self.version == "v2":
            (self.path / "memory.max").write_text(str(limit))
            if (self.path / "memory.swap.max").exists():
                (self.path / "memory.swap.max").write_text("0")
            return
        (self.path / "memory.limit_in_bytes").write_text(str(limit))
        memsw = self.path / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            memsw.write_text(str(limit))

    @property
    def procs_file(self) -> str:
        return str(self.path / "cgroup.procs")

    def usage(self) -> int:
        name = "memory.current" if self.version == "v2" else "memory.usage_in_bytes"
        try:
            return int((self.path / name).read_text())
        except (OSError, ValueError):
            return -1

    def wait_released(self, timeout: float = 2.0) -> None:
        """Namespaces (and the tmpfs, memfd and SysV segments in them) are torn down asynchronously
        after the last process exits; wait until their memory is uncharged so the slot's next run
        gets its whole limit."""
        import time
        deadline = time.monotonic() + timeout
        while self.usage() > self.limit // 8 and time.monotonic() < deadline and not self._busy():
            time.sleep(0.02)

    def _busy(self) -> bool:
        try:
            return bool(Path(self.procs_file).read_text().strip())
        except OSError:
            return False

    def oom_kills(self) -> int:
        name = "memory.events" if self.version == "v2" else "memory.oom_control"
        try:
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def kill_all(self) -> None:
        """Kill whatever is still in the cgroup, by the pids it lists (only processes we started)."""
        if self.version == "v2" and (self.path / "cgroup.kill").exists():
            try:
                (self.path / "cgroup.kill").write_text("1")
            except OSError:
                pass
        try:
            pids = [int(p) for p in Path(self.procs_file).read_text().split()]
        except OSError:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def close(self) -> None:
        self.kill_all()
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                import time
                time.sleep(0.02)


def _sweep(parent: Path) -> None:
    """Remove empty cgroups that a sandbox of a process that no longer exists left behind."""
    try:
        for d in parent.glob("cidermill-sandbox-*"):
            pid = d.name.split("-")[2]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                try:
                    d.rmdir()
                except OSError:
                    pass
    except OSError:
        pass
