"""The distributed engine: the same tasks and stages through Ray Data.

The dataset handed to Ray Data holds one row per task (the pickled TaskSpec); `map_batches` runs
each task on a worker, where the task streams its input's Arrow batches through the stages and
writes its shard, exactly as the local executor does. Keeping the task (one input -> one output
shard) as the unit is what makes a Ray run and a local run byte-identical, hence the same version
id: letting Ray re-block the rows would change shard boundaries and so the content address.
Ray Data brings the scheduling, retries of lost workers, and cluster placement.
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
import threading
from typing import Any, Callable, Iterable

import pyarrow as pa

from manifests.errors import ConfigError, FatalError

from ..stage import Shared, TaskMap
from .base import Executor
from .task import TaskResult, TaskSpec, run_task

log = logging.getLogger("cidermill.ray")


def probe_address(address: str, timeout_s: float) -> None:
    """Fail fast, in one line, when a Ray `address` (`host:port`, `ray://host:port`) does not answer.

    `ray.init` on an unreachable address retries for minutes; a TCP connect says it in seconds.
    `auto` and `local` are Ray's own lookups and are not probed here.
    """
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"executor.address {address!r}: expected host:port or ray://host:port")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise FatalError(f"cannot reach the Ray cluster at {address} within {timeout_s:g} s ({reason}); "
                         "check --address / executor.address, or drop it to start a local Ray") from None


AUTH_HINT = ("set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN=<token> (or RAY_AUTH_TOKEN_PATH=<file>) to the cluster's "
             "token (`ray get-auth-token` on the head prints it), on this machine as on every node")


def probe_auth(address: str) -> None:
    """Ask the cluster's GCS for its id, so that a token the cluster refuses (Ray >= 2.52 with
    RAY_AUTH_MODE=token) is one line saying what to set; `ray.init` only retries and logs it."""
    if "://" in address or address in ("auto", "local"):
        return  # Ray Client addresses authenticate in ray.init itself
    try:
        from ray._raylet import GcsClient
        from ray.exceptions import AuthenticationError
    except ImportError:  # an older or newer Ray without these: ray.init reports instead
        return
    try:
        GcsClient(address=address)
    except AuthenticationError as exc:
        missing = os.environ.get("RAY_AUTH_MODE", "disabled") != "token"
        what = "requires token authentication" if missing else "refused our token (RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH)"
        raise FatalError(f"the Ray cluster at {address} {what}: {AUTH_HINT}") from None
    except Exception as exc:  # noqa: BLE001  (anything else: let ray.init say it)
        log.debug("GCS probe of %s: %s", address, exc)


PACKAGES = ("manifests", "corpus", "synth")  # what tasks import; bundled resources are package data inside them
SHIP_EXCLUDES = ["__pycache__", "*.pyc", ".venv", "data/root", ".staging", "*.egg-info"]


def code_runtime_env(extra: dict | None = None) -> dict:
    """A Ray runtime_env that ships this checkout's packages (with their bundled resources) to every
    node, so the nodes need only Python and the same dependencies, not the code at the same path."""
    import importlib

    env = dict(extra or {})
    mods = [os.path.dirname(importlib.import_module(name).__file__) for name in PACKAGES]
    env["py_modules"] = [*mods, *env.get("py_modules", [])]
    env["excludes"] = [*SHIP_EXCLUDES, *env.get("excludes", [])]
    return env


def _quiet_ray() -> None:
    """Ray's INFO lines (execution plans, "Starting execution") and its warnings go to the log file
    Ray keeps per session; the terminal shows them only with `cidermill -v` (root logger at INFO)."""
    if logging.getLogger().getEffectiveLevel() <= logging.INFO:
        return
    for name in ("ray", "ray.data", "ray._private", "ray.data._internal.execution.streaming_executor"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _ensure_ray(address: str | None, workers: int, timeout_s: float = 15.0, *, runtime_env: dict | None = None):
    if address:
        probe_address(address, timeout_s)
        probe_auth(address)
    import ray
    import ray.data  # noqa: F401  (configures Ray Data's loggers; _quiet_ray overrides them)

    _quiet_ray()
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "configure_logging": False}
        if address:
            if runtime_env:
                kwargs["runtime_env"] = runtime_env
            _init_with_timeout(ray, dict(address=address, **kwargs), address, timeout_s)
        else:
            # "local": a new Ray of our own, even where `ray start` left a cluster running here
            ray.init(address="local", num_cpus=workers, **kwargs)
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    return ray


def _init_with_timeout(ray, kwargs: dict, address: str, timeout_s: float) -> None:
    """The port answered but `ray.init` may still wait on something that is not a Ray head."""
    failure: list[BaseException] = []

    def _init():
        try:
            ray.init(**kwargs)
        except BaseException as exc:  # handed to the caller below
            failure.append(exc)

    t = threading.Thread(target=_init, daemon=True, name="ray-init")
    t.start()
    t.join(timeout_s * 4)
    if t.is_alive():
        raise FatalError(f"connecting to the Ray cluster at {address} did not finish in {timeout_s * 4:g} s; "
                         "is a Ray head (of the same Ray version) listening there?")
    if failure:
        exc = failure[0]
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "auth" in text.lower() or "token" in text.lower():
            raise FatalError(f"cannot connect to the Ray cluster at {address}: {text}; {AUTH_HINT}") from None
        raise FatalError(f"cannot connect to the Ray cluster at {address}: {text} (if the cluster uses token "
                         f"authentication: {AUTH_HINT})") from None


def _apply_pickled(fn_bytes: bytes):
    fn = pickle.loads(fn_bytes)

    def _run(batch: pa.Table) -> pa.Table:
        outs = [pickle.dumps(fn(pickle.loads(item))) for item in batch.column("item").to_pylist()]
        return pa.table({"index": batch.column("index"), "result": pa.array(outs, pa.binary())})

    return _run


def ray_map(fn: Callable[[Any], Any], items: list[Any], *, workers: int) -> list[Any]:
    """Run `fn` over `items` with Ray Data, one item per batch; results in item order."""
    import cloudpickle
    import ray

    if not items:
        return []
    table = pa.table({"index": pa.array(range(len(items)), pa.int64()),
                      "item": pa.array([cloudpickle.dumps(x) for x in items], pa.binary())})
    ds = ray.data.from_arrow(table).repartition(len(items))
    n = max(1, min(workers, len(items)))
    # Ray >= 2.51 takes the pool size as `compute=` (`concurrency=` is deprecated there)
    pool = {"compute": ray.data.TaskPoolStrategy(size=n)} if hasattr(ray.data, "TaskPoolStrategy") else {"concurrency": n}
    ds = ds.map_batches(_apply_pickled(cloudpickle.dumps(fn)), batch_size=1, batch_format="pyarrow", **pool)
    results: dict[int, Any] = {}
    # Streamed to the driver as tasks finish: a result held only by a node that dies later is not lost
    for t in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        for idx, res in zip(t.column("index").to_pylist(), t.column("result").to_pylist()):
            results[idx] = pickle.loads(res)
    return [results[i] for i in range(len(items))]


class RayTaskMap(TaskMap):
    def __init__(self, workers: int):
        self.workers = workers

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
        return ray_map(fn, list(items), workers=self.workers)

    def broadcast(self, value: Any, **_: Any) -> "RayShared":
        """Put a large read-only value (the decontamination index) in Ray's object store once; tasks
        on every node read it from there (zero-copy for numpy arrays on the same node)."""
        import ray

        return RayShared(ray.put(value))


class RayShared(Shared):
    def __init__(self, ref):
        self.ref = ref  # an ObjectRef; pickled with the task (out-of-band, pinned while the driver lives)

    def get(self) -> Any:
        import ray

        key = self.ref.hex()
        if key not in _RAY_SHARED:
            _RAY_SHARED.clear()  # one broadcast value per worker process at a time
            _RAY_SHARED[key] = ray.get(self.ref)
        return _RAY_SHARED[key]


_RAY_SHARED: dict[str, Any] = {}


class RayExecutor(Executor):
    kind = "ray"

    def __init__(self, pipeline, *, progress: bool = True):
        super().__init__(pipeline, progress=progress)
        spec = pipeline.executor
        env = code_runtime_env(spec.runtime_env) if spec.address and spec.ship_code else (dict(spec.runtime_env) or None)
        ray = _ensure_ray(spec.address, spec.n_workers, spec.connect_timeout_s, runtime_env=env)
        # `workers: 0` means the cluster's size: every CPU of every node (a local Ray has this machine's)
        self.workers = spec.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))

    def task_map(self) -> TaskMap:
        return RayTaskMap(self.workers)

    def run_tasks(self, specs: list[TaskSpec], stage_names: list[str]) -> list[TaskResult]:
        for spec in specs:
            spec.progress = None  # Ray reports its own progress; our queue does not cross nodes
        results = ray_map(run_task, specs, workers=self.workers)
        if self.show_progress:
            rows = sum(r.stats[0].rows_in for r in results)
            log.info("ray: %d tasks done, %d rows read", len(results), rows)
        return results

    def close(self) -> None:
        import ray

        if ray.is_initialized() and not self.pipeline.executor.address:
            ray.shutdown()
