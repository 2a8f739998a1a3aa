"""Executors: `local` (embedded default) and `ray` (distributed). Same tasks, same bytes."""

from __future__ import annotations

import os

from ..pipeline import Pipeline
from ..stage import TaskMap
from .base import Executor, NothingKept, RunOutcome
from .task import TaskResult, TaskSpec, run_task


def make_executor(pipeline: Pipeline, *, progress: bool = True) -> Executor:
    if pipeline.executor.kind == "ray":
        from .ray import RayExecutor

        return RayExecutor(pipeline, progress=progress)
    from .local import LocalExecutor

    return LocalExecutor(pipeline, progress=progress)


def make_task_map(kind: str = "local", *, workers: int = 0, address: str | None = None, fork: bool = False) -> TaskMap:
    """The executor's task map outside a pipeline (tokenizing): `fn` over items on the local pool or Ray."""
    workers = workers or os.cpu_count() or 1
    if kind == "ray":
        from .ray import RayTaskMap, _ensure_ray

        _ensure_ray(address, workers)
        return RayTaskMap(workers)
    from .local import LocalTaskMap

    return LocalTaskMap(workers, fork=fork)


def run_pipeline(pipeline: Pipeline, *, progress: bool = True) -> RunOutcome:
    executor = make_executor(pipeline, progress=progress)
    try:
        return executor.run()
    finally:
        executor.close()


__all__ = ["Executor", "NothingKept", "RunOutcome", "TaskResult", "TaskSpec", "make_executor", "make_task_map",
           "run_pipeline", "run_task"]
