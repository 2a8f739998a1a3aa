"""Advisory locks under a data root: `<root>/.locks/<key>.lock`.

Local roots use `flock` on the lock file. The kernel drops the lock when its holder dies, however
it dies (kill -9 included), so a stale lock is never left behind and nobody has to guess whether a
holder is still alive; the file only carries who holds it (pid, host, command, since when) so a
waiting run can say so. The file is never deleted (deleting a flock'ed file lets two processes
lock two different inodes).

Object stores have no flock, and pyarrow.fs has no conditional write (If-None-Match), so there a
lock is a folder of tickets, `<root>/.locks/<key>.lock/<ns>-<token>.json`, taken in two steps:
write our ticket, then list the folder; we hold the lock if ours is the only live ticket, else we
delete ours and try again after a random pause. With strongly consistent PUT and LIST (S3 since
2020, GCS), two contenders cannot both win: each one's LIST starts after its own PUT finished, so
at least one of them sees the other's ticket. (They can both back off; the random pause ends
that.) A holder rewrites its ticket every `heartbeat_s` (a counter inside it goes up); a ticket a
waiter has seen unchanged for `stale_after_s` on its own clock (no clock skew between machines
enters) belongs to a holder that died, a `kill -9` included, and is deleted with a warning. So a
killed run's rerun waits about `stale_after_s` (30 s) on an object store, and none on a local root.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import sys
import threading
import time
import uuid

from .errors import FatalError
from .storage import Location

log = logging.getLogger("cidermill.locks")
LOCKS_DIR = ".locks"
HEARTBEAT_S = 5.0  # object stores: how often a holder rewrites its ticket
STALE_AFTER_S = 30.0  # object stores: a ticket unchanged this long (waiter's clock) is a dead holder's


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
                 stale_after_s: float = STALE_AFTER_S, heartbeat_s: float = HEARTBEAT_S, poll_s: float = 0.2):
        self.loc = root.join(LOCKS_DIR, f"{key}.lock")
        self.what = what
        self.wait_s = wait_s
        self.stale_after_s = stale_after_s
        self.heartbeat_s = heartbeat_s
        self.poll_s = poll_s
        self._fd: int | None = None
        self._info: dict | None = None
        self._seen: dict[str, tuple[str, float]] = {}  # ticket -> (content, when we first saw it so)
        self._stop = threading.Event()
        self._beater: threading.Thread | None = None

    # ---- public ----------------------------------------------------------------------------
    def __enter__(self) -> "Lock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def holder(self) -> dict | None:
        if not self.loc.is_local:
            live = self._tickets()
            return live[0][1] if live else None
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
                if not self.loc.is_local:
                    msg += f" (taken over if its heartbeat stops for {self.stale_after_s:g} s)"
                log.warning("%s", msg)
                print(msg, file=sys.stderr, flush=True)
                told = True
            time.sleep(self.poll_s if self.loc.is_local else self.poll_s * random.uniform(0.5, 1.5))

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
            self._stop.set()
            if self._beater is not None:
                self._beater.join()  # no beat may re-create the ticket after it is deleted
                self._beater = None
            self._ticket(self._info).delete()
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

    def _ticket(self, info: dict) -> Location:
        return self.loc.join(f"{int(info['since'] * 1e9):020d}-{info['token']}.json")

    def _tickets(self) -> list[tuple[Location, dict]]:
        """Live tickets, oldest first; stale ones (a holder that died) are deleted on the way."""
        live = []
        for name in sorted(self.loc.file_sizes()):
            loc = self.loc.join(name)
            try:
                text = loc.read_bytes().decode()
                info = json.loads(text)
            except (OSError, ValueError):  # deleted meanwhile, or a torn foreign file: not a holder
                continue
            now = time.monotonic()
            content, since = self._seen.get(loc.path, (None, now))
            if content != text:
                self._seen[loc.path] = (text, now)
            elif now - since >= self.stale_after_s:
                log.warning("removing lock ticket %s of %s: no heartbeat for %.0f s (its holder died)",
                            loc.uri, describe_holder(info), now - since)
                print(f"taking over {self.what}: its holder ({describe_holder(info)}) stopped its heartbeat "
                      f"{now - since:.0f} s ago", file=sys.stderr, flush=True)
                loc.delete()
                continue
            live.append((loc, info))
        return live

    def _try_object(self) -> bool:
        if self._tickets():
            return False
        info = _holder()
        mine = self._ticket(info)
        mine.write_bytes_atomic(json.dumps(info).encode())
        if [loc.path for loc, _ in self._tickets()] != [mine.path]:
            mine.delete()  # someone else wrote one too: back off and try again
            return False
        self._info = info
        self._stop = threading.Event()
        self._beater = threading.Thread(target=self._beat, args=(mine, info, self._stop), daemon=True,
                                        name="lock-heartbeat")
        self._beater.start()
        return True

    def _beat(self, ticket: Location, info: dict, stop: threading.Event) -> None:
        """Rewrite the ticket every `heartbeat_s` until released, so waiters see this holder is alive."""
        info = dict(info)
        while not stop.wait(self.heartbeat_s):
            info["beat"] = info.get("beat", 0) + 1
            try:
                ticket.write_bytes_atomic(json.dumps(info).encode())
            except OSError as exc:  # a network blip: the next beat may get through
                log.warning("lock heartbeat %s failed: %s", ticket.uri, exc)
