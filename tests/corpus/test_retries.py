"""RetryableError is retried inside the task (corpus/executors/task.py), so the local executor, its
process pool and Ray (which runs the same `run_task`) all retry alike; past the limit it stops the run."""

from __future__ import annotations

import pytest

from corpus.executors import run_pipeline
from corpus.pipeline import load_pipeline
from manifests.errors import RetryableError

from . import flaky_stage  # noqa: F401  (registers test_flaky_v1)
from ..conftest import write_jsonl


def _pipeline(tmp_path, docs, *, workers: int, retries: int, fail_times: int) -> dict:
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    write_jsonl(folder / "part-00.jsonl.gz", docs[:40], compress="gz")
    return {
        "name": "flaky", "input": {"format": "jsonl", "paths": [str(folder / "*.jsonl.gz")]},
        "output": {"root": str(tmp_path / "root")},
        "executor": {"kind": "local", "workers": workers, "max_task_retries": retries},
        "stages": [{"test_flaky_v1": {"counter": str(tmp_path / "calls"), "fail_times": fail_times}}],
    }


@pytest.mark.parametrize("workers", [1, 2])
def test_a_retryable_error_is_retried_then_the_task_succeeds(tmp_path, c4_docs, workers):
    out = run_pipeline(load_pipeline(_pipeline(tmp_path, c4_docs, workers=workers, retries=2, fail_times=2)),
                       progress=False)
    assert out.version.manifest.rows == 40
    assert len((tmp_path / "calls").read_text()) == 3  # two failures, one success


def test_past_the_retry_limit_the_run_stops(tmp_path, c4_docs):
    with pytest.raises(RetryableError, match="flaky call 2"):
        run_pipeline(load_pipeline(_pipeline(tmp_path, c4_docs, workers=1, retries=1, fail_times=5)), progress=False)


def test_run_task_itself_retries_so_ray_does_too(tmp_path, c4_docs):
    """RayExecutor maps `run_task` over the specs; the retry lives in `run_task`, not in an executor."""
    import inspect

    from corpus.executors import ray as ray_executor
    from corpus.executors.local import LocalExecutor
    from corpus.executors.task import run_task

    assert "ray_map(run_task" in inspect.getsource(ray_executor.RayExecutor.run_tasks)
    pipeline = load_pipeline(_pipeline(tmp_path, c4_docs, workers=1, retries=1, fail_times=1))

    captured = []

    class Capture(LocalExecutor):
        def run_tasks(self, specs, stage_names):
            captured.extend(specs)
            return [run_task(s) for s in specs]  # what ray_map does on a worker

    Capture(pipeline, progress=False).run()
    assert [s.max_retries for s in captured] == [1]
    assert len((tmp_path / "calls").read_text()) == 2
