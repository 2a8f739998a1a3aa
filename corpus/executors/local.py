"""The embedded default: a process pool over input files on one machine, no services.

Workers are forked from a forkserver that has already imported the engine, so starting one is
cheap and no pyarrow thread pool is forked mid-flight. With one worker, tasks run in-process.

Workers die with the run: each asks the kernel for SIGKILL when its parent (the forkserver, which
itself exits when the run's process is gone) dies (PR_SET_PDEATHSIG), and checks that the run is
still alive before it writes (task.py). So a kill -9 of the run leaves no process writing.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import multiprocessing as mp
import os
import signal
import queue
import select
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, Callable, Iterable


from ..stage import Shared, StoredShared, TaskMap
from .base import Executor
from .task import TaskResult, TaskSpec, defer_marker_write, run_task

log = logging.getLogger("cidermill.local")


def _context(preload: Iterable[str] = ()) -> mp.context.BaseContext:
    """The forkserver context. `preload`: more modules to import in the forkserver when it starts (it starts
    once per process; later calls cannot add to it, and their workers import what they lack themselves)."""
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        # corpus.executors.local: the workers' initializer lives here (each worker imported it on start).
        # pandas: pyarrow imports it lazily the first time it checks whether a value is a pandas object
        # (building any table), and the readers import pyarrow.dataset: 0.2-0.4 s of imports in every
        # worker's first task otherwise. The forkserver skips a preload that fails to import (no pandas).
        ctx.set_forkserver_preload(["corpus.executors.task", "corpus.executors.local", "corpus.registry",
                                    "pandas", "pyarrow.pandas_compat", "pyarrow.dataset", *preload])
        return ctx
    return mp.get_context("spawn")


def stage_modules(stages: Iterable) -> list[str]:
    """What a pipeline's workers import: each stage's module and its declared heavy imports (`Stage.preload`).
    Imported once in the forkserver, these cost one import per run instead of one per worker per pass
    (the web pipeline: ~0.7 CPU-s of stage modules per worker per pool, 3 s for spaCy)."""
    return sorted({m for s in stages for m in (type(s).__module__, *getattr(s, "preload", ()))})


_PR_SET_PDEATHSIG = 1


def _start_worker(owner_pid: int, env: dict[str, str]) -> None:
    """Pool initializer: inherited objects frozen, the run's environment, then `die_with_parent`.

    The worker inherits every module the forkserver imported (spaCy, models' tables): a million
    objects that the garbage collector would walk at each full collection, copying every page it
    touches (copy on write) and spending ~0.1 s each time. Frozen, they are never walked; they live
    as long as the worker anyway. A forkserver is started once per process and keeps the environment
    it started with, so a variable set later (object-store credentials, `CIDERMILL_*`) would not reach
    its workers; each worker takes the run's environment as it is when the pool starts, as a forked
    one would."""
    gc.freeze()
    for key in set(os.environ) - set(env):
        del os.environ[key]
    os.environ.update(env)
    die_with_parent(owner_pid)


def die_with_parent(owner_pid: int) -> None:
    """End this worker as soon as the run (`owner_pid`) is gone.

    A forkserver worker's parent is the forkserver, not the run, and the forkserver only exits
    once every worker has (they hold its liveness pipe), so PDEATHSIG alone would not fire: a
    watchdog thread waits on the run's pidfd (or polls) and exits the worker when the run dies.
    PDEATHSIG still covers a killed forkserver.
    """
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl: the watchdog and task.py's checks remain
            pass
    if not _alive(owner_pid):
        os._exit(1)
    threading.Thread(target=_watch, args=(owner_pid,), daemon=True, name="watch-run").start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _watch(owner_pid: int) -> None:
    try:
        fd = os.pidfd_open(owner_pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        select.select([fd], [], [])  # readable when the process exits
    else:
        while _alive(owner_pid):
            time.sleep(0.2)
    os._exit(1)  # no cleanup: the run is gone, and its next run redoes this task


def _pool(workers: int, ctx) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(workers, mp_context=ctx, initializer=_start_worker,
                               initargs=(os.getpid(), dict(os.environ)))


class _HereShared(StoredShared):
    """A broadcast value that the process which broadcast it gets as it is, not by loading its saved copy:
    a one-worker run (or a one-item map) runs its tasks in the driver, which already holds the value (the
    decontamination index: ~0.3 CPU-s to read back 74 MB, and its bitmap built again). Other processes,
    forked or not, load the saved copy once each, as before; the value never travels in a pickle."""

    def __init__(self, location, load, value):
        super().__init__(location, load)
        object.__setattr__(self, "_value", value)
        object.__setattr__(self, "_pid", os.getpid())

    def get(self) -> Any:
        if os.getpid() == self._pid:
            return self._value
        return super().get()

    def __reduce__(self):
        return StoredShared, (self.location, self.load)


class LocalTaskMap(TaskMap):
    def __init__(self, workers: int, *, fork: bool = False, preload: tuple[str, ...] = ()):
        self.workers = workers
        self.preload = preload
        # fork: workers inherit what the parent imported and built (tokenizing: megatron-core, the tokenizer)
        self.fork = fork and "fork" in mp.get_all_start_methods()

    def broadcast(self, value: Any, *, saved: Any = None, load: Callable[[Any], Any] | None = None) -> Shared:
        if saved is not None and load is not None:
            return _HereShared(saved, load, value)
        return super().broadcast(value, saved=saved, load=load)

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
        items = list(items)
        if self.workers <= 1 or len(items) <= 1:
            return [fn(x) for x in items]
        ctx = mp.get_context("fork") if self.fork else _context(self.preload)
        with _pool(min(self.workers, len(items)), ctx) as pool:
            return list(pool.map(fn, items))


class Progress:
    """One bar per stage, rows/s, fed by (stage, rows) messages from the workers. Only on a terminal:
    redirected to a file or a CI log, bars would be carriage returns and cursor codes (the stats table
    at the end says the same)."""

    def __init__(self, names: list[str], enabled: bool):
        self.bars = {}
        if enabled and getattr(sys.stderr, "isatty", lambda: False)():
            from tqdm import tqdm

            width = max(len(n) for n in names)
            self.bars = {n: tqdm(desc=n.ljust(width), unit=" rows", position=i, leave=True,
                                 file=sys.stderr, dynamic_ncols=True, mininterval=0.5)
                         for i, n in enumerate(names)}

    def update(self, stage: str, rows: int) -> None:
        bar = self.bars.get(stage)
        if bar is not None:
            bar.update(rows)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def _wait_for_markers(specs: list[TaskSpec], *, raising: bool) -> None:
    """Wait for every deferred marker write; the first failure is raised (after all have finished) if `raising`."""
    first = None
    for spec in specs:
        if spec.marker_written is not None:
            try:
                spec.marker_written()
            except BaseException as exc:  # noqa: BLE001 - re-raised below, once every write has ended
                first = first or exc
            spec.marker_written = None
    if first is not None and raising:
        raise first


class LocalExecutor(Executor):
    kind = "local"

    def task_map(self) -> TaskMap:
        return LocalTaskMap(self.pipeline.executor.n_workers, preload=tuple(stage_modules(self.pipeline.stages)))

    def run_tasks(self, specs: list[TaskSpec], stage_names: list[str]) -> list[TaskResult]:
        workers = min(self.pipeline.executor.n_workers, max(len(specs), 1))
        progress = Progress(stage_names, self.show_progress)
        try:
            if workers <= 1:
                return self._run_inline(specs, progress)
            return self._run_pool(specs, workers, progress)
        finally:
            progress.close()

    def _run_inline(self, specs: list[TaskSpec], progress: Progress) -> list[TaskResult]:
        class _Direct:
            def put(self, msg):
                progress.update(*msg)

        # one task at a time: any other core can take its hashing (task.py, `spare_cores`), and each task's
        # marker is written while the next task runs (`defer_marker`); all are on disk before this returns
        spare = (os.cpu_count() or 1) > 1
        results = []
        try:
            for spec in specs:
                spec.spare_cores = spare
                spec.defer_marker = True
                spec.progress = _Direct() if progress.bars else None
                results.append(run_task(spec))  # retries happen inside the task (task.py)
        except BaseException:
            _wait_for_markers(specs, raising=False)  # the error that stopped the pass is the one to report
            raise
        _wait_for_markers(specs, raising=True)
        return results

    def _run_pool(self, specs: list[TaskSpec], workers: int, progress: Progress) -> list[TaskResult]:
        ctx = _context(stage_modules(self.pipeline.stages))
        manager = None
        if progress.bars:
            from multiprocessing.managers import SyncManager

            manager = SyncManager(ctx=ctx)
            manager.start(die_with_parent, (os.getpid(),))
        q = manager.Queue() if manager else None
        results: dict[int, TaskResult] = {}
        try:
            with _pool(workers, ctx) as pool:
                pending: dict[Future, TaskSpec] = {}
                for spec in specs:
                    spec.progress = q
                    spec.owner_pid = os.getpid()
                    spec.spare_cores = workers < (os.cpu_count() or 1)
                    spec.marker_by_caller = True  # written here, beside the workers (task.py)
                    pending[pool.submit(run_task, spec)] = spec
                while pending:
                    done, _ = wait(list(pending), timeout=0.2, return_when=FIRST_COMPLETED)
                    self._drain(q, progress)
                    for fut in done:
                        spec = pending.pop(fut)
                        try:
                            result = fut.result()  # retried inside the task (task.py)
                        except BaseException:
                            for other in pending:
                                other.cancel()
                            raise
                        results[spec.index] = result
                        if not result.resumed:  # a resumed task's marker is already on disk
                            defer_marker_write(spec, result)
                self._drain(q, progress)
        except BaseException:
            _wait_for_markers(specs, raising=False)  # the error that stopped the pass is the one to report
            raise
        finally:
            if manager is not None:
                manager.shutdown()
        _wait_for_markers(specs, raising=True)
        return [results[s.index] for s in specs]

    @staticmethod
    def _drain(q, progress: Progress) -> None:
        if q is None:
            return
        while True:
            try:
                progress.update(*q.get_nowait())
            except (queue.Empty, EOFError, OSError):
                return
