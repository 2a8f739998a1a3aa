"""sha256 off the critical path: a sink that hashes the bytes it writes, and work started in a thread.

Every shard a task writes is hashed (the manifest records it), and so is every input a task reads
(its marker records it; issue 35). Done after the fact, both cost a second pass over the bytes on the
task's own thread: ~0.04 s of a 0.7 s identity copy of 30 MB (issue 44). `HashingSink` hashes each
piece as the Parquet writer hands it over, in a helper thread (hashlib releases the GIL for pieces
over 2 KiB; the threads are started once per process and reused) where a core is free for it, else on the
writer's own thread, so the digest is ready when the file closes and the file is never read back;
`in_background` lets a reader hash an input that it does not stream while it decodes it.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from typing import Any, Callable

_END = object()


class _Threads:
    """This process's helper threads, started once and reused: a job goes to an idle thread, else to a new one,
    so a job never waits behind another (a sink's loop runs until its file closes) and no two jobs need each
    other. Starting a thread waits until the new thread has run; on a loaded machine that took ~15 ms, and a
    one-worker run of four inputs started nine (two per task and one per run): ~0.14 s of wall time per run in
    `executor_overhead.py` at load 3.5 (issue 44). Daemon threads, as before: a job that never ends (a sink
    never closed after an error) must not hold the process at exit. A job's `done` event is set by the thread after
    it counts itself idle again, so a caller that waits for one job and then submits the next finds that thread
    idle (setting the event inside the job let the next job start a thread while the finished one was still
    counting itself busy: a fourth thread where three suffice, seen on a loaded machine)."""

    def __init__(self):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a job that no submitted job has claimed yet
        self.started = 0  # threads this set has started (a test counts them, apart from other tests' threads)

    def submit(self, fn: Callable[[], None], done: threading.Event | None = None) -> None:
        with self._lock:
            spawn = self._idle == 0
            if spawn:
                self.started += 1
            else:
                self._idle -= 1
        if spawn:
            threading.Thread(target=self._loop, daemon=True, name="cidermill-helper").start()
        self._jobs.put((fn, done))

    def _loop(self) -> None:
        while True:
            job, done = self._jobs.get()
            try:
                job()  # every job hands its own errors to its caller (below); this keeps the thread alive
            except BaseException:
                pass
            with self._lock:
                self._idle += 1
            if done is not None:
                done.set()


_threads = _Threads()


def _after_fork() -> None:  # a forked child has none of its parent's threads
    global _threads
    _threads = _Threads()


os.register_at_fork(after_in_child=_after_fork)


def in_background(fn: Callable[[], Any], *, name: str = "background") -> Callable[[], Any]:
    """fn() started in a helper thread now; the returned callable waits for its result (re-raising its error).
    `name` says what the job is (kept for callers; the threads are shared)."""
    box: dict = {}
    done = threading.Event()

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    _threads.submit(target, done)  # the thread sets `done` once it is idle again

    def result():
        done.wait()
        if "error" in box:
            raise box["error"]
        return box["value"]

    return result


class HashingSink:
    """A write-only file object for `pq.ParquetWriter`: every byte goes to `raw` (a pyarrow output stream)
    and, in write order, into a sha256. `digest()` (after `close()`) is the sha256 and byte count of exactly
    what was written.

    `threaded`: the sha256 runs in a thread of its own, overlapping the writer's encoding and compression.
    That shortens a task only where a core is free for it (one worker on a machine with more cores); where
    every core already runs a worker it only adds thread switches, so the executor asks for it only then
    (task.py, `TaskSpec.spare_cores`). Either way the bytes are hashed once and never read back. The queue is
    bounded, so a slow hash holds the writer back rather than holding the shard in memory."""

    HAND_OVER_BYTES = 1 << 20

    def __init__(self, raw, *, threaded: bool = True, max_pending: int = 8):
        self._raw = raw
        self._sha = hashlib.sha256()
        self._n = 0
        self._queue: queue.Queue = queue.Queue(max_pending)
        self._error: BaseException | None = None
        self._batch: list[bytes] = []
        self._batch_bytes = 0
        self._done: threading.Event | None = None  # set once the hashing job has taken its last piece
        if threaded:
            self._done = threading.Event()
            _threads.submit(self._hash, self._done)  # set by the thread after the job, once it is idle
        self.closed = False

    def _hash(self) -> None:
        while (pieces := self._queue.get()) is not _END:
            if self._error is None:
                try:
                    for piece in pieces:
                        self._sha.update(piece)
                except BaseException as exc:  # reported by digest(); keep draining so write() never blocks
                    self._error = exc

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        # pyarrow (26 here) hands over bytes, which cannot change while the queue holds them; anything else
        # (a view of a buffer the writer may reuse once this returns) is copied first
        if not isinstance(data, bytes):
            data = bytes(memoryview(data).cast("B"))
        self._raw.write(data)
        self._n += len(data)
        if self._done is None:
            self._sha.update(data)
            return len(data)
        self._batch.append(data)
        self._batch_bytes += len(data)
        if self._batch_bytes >= self.HAND_OVER_BYTES:
            self._hand_over()
        return len(data)

    def _hand_over(self) -> None:
        # pieces go to the thread together, ~1 MiB at a time: one wake-up per MiB rather than per piece (an
        # unbuffered Parquet writer hands over ~200 pieces per MiB, and each wake-up is a GIL hand-off)
        if self._batch:
            self._queue.put(self._batch)
            self._batch = []
            self._batch_bytes = 0

    def tell(self) -> int:
        return self._n

    def flush(self) -> None:
        self._raw.flush()

    def close(self) -> None:
        """Close the file and stop the hashing thread (the digest is then complete)."""
        if self.closed:
            return
        self.closed = True
        try:
            self._raw.close()
        finally:
            if self._done is not None:
                self._hand_over()
                self._queue.put(_END)
                self._done.wait()

    def digest(self) -> tuple[str, int]:
        """(hex sha256, byte count) of everything written; only after `close()`."""
        if not self.closed:
            raise RuntimeError("HashingSink.digest() before close()")
        if self._error is not None:
            raise self._error
        return self._sha.hexdigest(), self._n
