"""Advisory locks under a data root: `<root>/.locks/<key>.lock`.

Local roots use `flock` on the lock file. The kernel drops the lock when its holder dies, however
it dies (kill -9 included), so a stale lock is never left behind and nobody has to guess whether a
holder is still alive; the file only carries who holds it (pid, host, command, since when) so a
waiting run can say so. The file is never deleted (deleting a flock'ed file lets two processes
lock two different inodes).

Object stores have no flock and pyarrow.fs has no conditional write, so there the lock is a
best-effort lock object: it is created if absent, read back to check that our token won, and
treated as stale after `stale_after_s`. Two runs starting within the same moment can both win;
a conditional PUT (If-None-Match) closes that gap and is left to the object-store work (issue 22).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
import uuid

from .errors import FatalError
from .storage import Location

log = logging.getLogger("cidermill.locks")
LOCKS_DIR = ".locks"


class LockBusy(FatalError):
    """Another process holds the lock and we were not asked to wait (long enough)."""


def _holder() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(),
            "command": " ".join(sys.argv)[:200], "token": uuid.uuid4().hex}


def describe_holder(info: dict | None) -> str:
    if not info:
        return "another process (holder unknown)"
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(info.get("since", 0)))
    return f"pid {info.get('pid')} on {info.get('host')} since {since} ({info.get('command', '')})"


class Lock:
    """`with Lock(root, key, what=...)`: hold `key` under `root`; waits up to `wait_s` (None = forever)."""

    def __init__(self, root: Location, key: str, *, what: str, wait_s: float | None = None,
                 stale_after_s: float = 6 * 3600, poll_s: float = 0.2):
        self.loc = root.join(LOCKS_DIR, f"{key}.lock")
        self.what = what
        self.wait_s = wait_s
        self.stale_after_s = stale_after_s
        self.poll_s = poll_s
        self._fd: int | None = None
        self._info: dict | None = None

    # ---- public ----------------------------------------------------------------------------
    def __enter__(self) -> "Lock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def holder(self) -> dict | None:
        try:
            text = self.loc.read_bytes()
            return json.loads(text) if text.strip() else None
        except (OSError, ValueError):
            return None

    def acquire(self) -> None:
        deadline = None if self.wait_s is None else time.monotonic() + self.wait_s
        told = False
        while not self._try():
            if deadline is not None and time.monotonic() >= deadline:
                raise LockBusy(f"{self.what} is locked by {describe_holder(self.holder())}; "
                               f"lock file {self.loc.uri}")
            if not told:
                msg = f"waiting: {self.what} is locked by {describe_holder(self.holder())}"
                log.warning("%s", msg)
                print(msg, file=sys.stderr, flush=True)
                told = True
            time.sleep(self.poll_s)

    def release(self) -> None:
        if self._fd is not None:
            import fcntl

            try:
                os.ftruncate(self._fd, 0)  # nobody holds it now
            except OSError:
                pass
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        elif self._info is not None:
            if (self.holder() or {}).get("token") == self._info["token"]:
                self.loc.delete()
        self._info = None

    # ---- mechanics -------------------------------------------------------------------------
    def _try(self) -> bool:
        return self._try_local() if self.loc.is_local else self._try_object()

    def _try_local(self) -> bool:
        import fcntl

        os.makedirs(os.path.dirname(self.loc.path), exist_ok=True)
        fd = os.open(self.loc.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        info = _holder()
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self._fd, self._info = fd, info
        return True

    def _try_object(self) -> bool:
        current = self.holder()
        if current and time.time() - float(current.get("since", 0)) < self.stale_after_s:
            return False
        if current:
            log.warning("taking over stale lock %s from %s", self.loc.uri, describe_holder(current))
        info = _holder()
        self.loc.write_bytes_atomic(json.dumps(info).encode())
        if (self.holder() or {}).get("token") != info["token"]:
            return False
        self._info = info
        return True
