"""Executors: `local` (embedded default) and `ray` (distributed). Same tasks, same bytes."""

from __future__ import annotations

from ..pipeline import Pipeline
from .base import Executor, NothingKept, RunOutcome
from .task import TaskResult, TaskSpec, run_task


def make_executor(pipeline: Pipeline, *, progress: bool = True) -> Executor:
    if pipeline.executor.kind == "ray":
        from .ray import RayExecutor

        return RayExecutor(pipeline, progress=progress)
    from .local import LocalExecutor

    return LocalExecutor(pipeline, progress=progress)


def run_pipeline(pipeline: Pipeline, *, progress: bool = True) -> RunOutcome:
    executor = make_executor(pipeline, progress=progress)
    try:
        return executor.run()
    finally:
        executor.close()


__all__ = ["Executor", "NothingKept", "RunOutcome", "TaskResult", "TaskSpec", "make_executor", "run_pipeline", "run_task"]
