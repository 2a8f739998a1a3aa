"""What `corpus plan` measures on a sample file before it projects (corpus/plan.py does the projecting).

Everything is measured in this process, in CPU seconds (a busy machine does not inflate them), on the
code paths a run takes:

- per-row work: the reader, every local stage and the Parquet writing of each pass's output and rejects
  (the executor's writer: zstd, fixed row groups, sha256), timed per small batch so that the page-to-page
  variation of the sample gives the plan's uncertainty (a bootstrap over batches, in plan.py);
- global stages: build + apply on the sample tiled to `GLOBAL_ROWS` rows (ids made unique), scaled back per
  row, plus the bytes the build writes (the shuffle) and its once-per-run part (`GlobalStage.build_fixed`);
- fixed costs the run pays whatever its size: per worker process and pass, the first call of each stage
  (models, word lists: `warmup_seconds`); per run, the start of the executor's forkserver, which imports the
  stage modules and their heavy libraries once for every worker (`startup_seconds`, a fresh interpreter
  timed), and the driver's own start (interpreter, imports, loading the pipeline: `driver_seconds`);
- the driver's memory: its resident size with the pipeline loaded, the peak of every global stage's
  once-per-run build (the decontamination index is built on the driver), and the bytes per row of the
  unique-id check at publish (it holds every id of the version).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from manifests.shards import ShardWriter
from manifests.storage import Location

from .readers import InputFile, make_reader
from .stage import GlobalStage

GLOBAL_ROWS = 20_000
MIN_BATCHES = 40  # timing batches of the sample, for the bootstrap


@dataclass
class StageCost:
    name: str
    seconds: float  # CPU seconds on the sample, one core (what grows with the data)
    rows_in: int
    rows_out: int
    is_global: bool = False
    shuffle_bytes: int = 0  # written by the build (and read back once)
    index_bytes: int = 0  # a broadcast index (decontamination)
    fixed_seconds: float = 0.0  # once per run whatever the size (building the decontamination index)
    warmup_seconds: float = 0.0  # once per worker process that runs it (its first call: models, tables)
    build_pools: int = 0  # task maps its build runs: the local executor opens a worker pool for each


@dataclass
class PassCost:
    stages: list[StageCost] = field(default_factory=list)
    output_bytes: int = 0  # Parquet bytes of the pass's output on the sample
    rejects_bytes: int = 0  # Parquet bytes of the rows it dropped (written to the rejects)
    write_seconds: float = 0.0  # CPU writing them (and reading them back in the next pass, for a global pass)


@dataclass
class Sample:
    passes: list[PassCost]
    sample_bytes: int
    batches: list[tuple[int, float, int]] = field(default_factory=list)  # pass 0 per batch: rows, CPU s, bytes out
    driver_seconds: float = 0.0
    startup_seconds: float = 0.0
    driver_floor_bytes: int = 0
    driver_build_peak_bytes: int = 0
    id_bytes: float = 0.0
    worker_start_seconds: float = 0.0  # CPU of one pool worker's start (fork, copy on write of what it touches)
    # cache entries (CIDERMILL_CACHE) this process wrote: the measurement paid for building them (the first use
    # on a machine), and its driver start, global builds' fixed parts and driver memory include that work, which
    # a run after it does not pay (it reads them)
    cold_caches: list[str] = field(default_factory=list)


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _peak_during(fn) -> int:
    """Peak resident bytes while fn() runs (Linux: VmHWM reset through clear_refs; else ru_maxrss)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    fn()
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def startup_seconds(stage_modules: list[str]) -> tuple[float, float]:
    """(the forkserver's start, one pool worker's start) in CPU seconds, on the local executor's own path in a
    fresh interpreter: the forkserver imports the engine and the stage modules once per run
    (corpus/executors/local.py preloads them); each pool a run opens forks its workers from it, and a
    forked worker pays for the memory it touches (copy on write: the garbage collector's first full pass
    over the inherited objects, timed here as the worker's task)."""
    import json

    code = ("import gc, json, time, psutil\n"
            "from corpus.executors.local import _context, _pool\n"
            f"ctx = _context({list(stage_modules)!r})\n"
            "with _pool(1, ctx) as pool:\n"
            "    pool.submit(gc.collect).result()\n"
            "server = next(c for c in psutil.Process().children() if 'forkserver' in ' '.join(c.cmdline()))\n"
            "for _ in range(100):  # the forkserver reaps its worker soon after the pool closes\n"
            "    t = server.cpu_times()\n"
            "    if t.children_user + t.children_system:\n"
            "        break\n"
            "    time.sleep(0.02)\n"
            "print(json.dumps([t.user + t.system, t.children_user + t.children_system]))\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    server, worker = json.loads(out.stdout.strip().splitlines()[-1])
    return server, worker


def id_check_bytes(ids: pa.Array) -> float:
    """Driver bytes per row of the unique-id check at publish (every id of the version is read and hashed;
    the group-by that names duplicates runs only when there are some), on the sample's ids tiled to 200k."""
    import pyarrow.compute as pc

    if len(ids) == 0:
        return 0.0
    reps = -(-200_000 // len(ids))
    tiled = pa.concat_arrays([pc.binary_join_element_wise(pc.cast(ids, pa.string()), pa.scalar(f"#{r}"), "")
                              for r in range(reps)])
    base = _rss()

    from .executors.finish import has_duplicates

    return max(_peak_during(lambda: has_duplicates(tiled)) - base, 0) / len(tiled)


def _tiled(table: pa.Table, rows: int, field_name: str | None) -> pa.Table:
    """The sample repeated to `rows` rows; ids and the stage's key field made unique per copy (exact
    and URL dedup then see no copies; for MinHash every copy is still a near-duplicate, so its
    cost is an upper bound)."""
    if table.num_rows == 0 or table.num_rows >= rows:
        return table
    reps = -(-rows // table.num_rows)
    out = pa.concat_tables([table] * reps)
    for name in {"id", field_name} - {None}:
        if name in out.schema.names:
            values = out.column(name).to_pylist()
            out = out.set_column(out.schema.get_field_index(name), name, pa.array(
                [None if v is None else f"{v} {i // table.num_rows}" for i, v in enumerate(values)], pa.string()))
    return out


class _InProcess:
    """A TaskMap on one core, in this process: the plan measures CPU seconds, not parallelism."""

    workers = 1
    partitions = None

    def __init__(self):
        self.maps = 0

    def map(self, fn, items):
        self.maps += 1
        return [fn(x) for x in items]

    def broadcast(self, value, **_):
        from .stage import InlineShared

        return InlineShared(value)


def _build(stage, table: pa.Table, folder: str, tasks: _InProcess | None = None):
    """Build `stage` over `table` split in two shards under `folder`; return its state."""
    root = Location.parse(folder)
    root.mkdir()
    half = max(1, table.num_rows // 2)
    shards = []
    for j, part in enumerate((table.slice(0, half), table.slice(half))):
        loc = root.join(f"shard-{j}.parquet")
        pq.write_table(part, loc.path)
        shards.append(loc)
    return stage.build(shards, workdir=root.join("work"), tasks=tasks or _InProcess())


def _tree_bytes(loc: Location) -> int:
    import pyarrow.fs as pafs

    info = loc.fs.get_file_info(loc.path)
    if info.type != pafs.FileType.Directory:
        return info.size or 0 if info.type == pafs.FileType.File else 0
    infos = loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=True))
    return sum(i.size or 0 for i in infos if i.type == pafs.FileType.File)


class _PassWriter:
    """The executor's writers for one pass (output and rejects), timed."""

    def __init__(self, folder: str, name: str, row_group_rows: int):
        from .executors.task import _rejects_view

        self.view = _rejects_view
        self.out = ShardWriter(Location.parse(f"{folder}/{name}"), "part", row_group_rows=row_group_rows)
        self.rej = ShardWriter(Location.parse(f"{folder}/{name}-rejects"), "part", row_group_rows=row_group_rows)
        self.seconds = 0.0

    def write(self, table: pa.Table | None = None, rejects: pa.Table | None = None) -> None:
        t0 = time.process_time()
        if table is not None:
            self.out.write(table)
        if rejects is not None:
            self.rej.write(self.view(rejects))
        self.seconds += time.process_time() - t0

    def close(self) -> tuple[int, int]:
        t0 = time.process_time()
        out, rej = self.out.close(), self.rej.close()
        self.seconds += time.process_time() - t0
        return sum(s.bytes for s in out), sum(s.bytes for s in rej)


def _local_pass(pipeline, reader, sample: InputFile, stages: list, tables: list[pa.Table], tmp: str
                ) -> tuple[PassCost, pa.Table, list]:
    """Pass 0 on the sample in small batches: each stage's CPU, the writes, per-batch totals."""
    rows = sum(t.num_rows for t in tables)
    batch = max(16, min(pipeline.executor.batch_rows, -(-rows // MIN_BATCHES)))
    warm = pa.concat_tables(tables, promote_options="default").slice(0, 8) if tables else None
    costs = [StageCost("read", 0.0, 0, 0)] + [StageCost(s.name, 0.0, 0, 0) for s in stages]
    for cost, stage in zip(costs[1:], stages):  # first calls: models and tables load here
        t0 = time.process_time()
        if warm is not None and warm.num_rows:
            warm = stage(warm).table
        cost.warmup_seconds = time.process_time() - t0
    writer = _PassWriter(tmp, "pass-0", pipeline.output.row_group_rows)
    kept, per_batch = [], []
    t_read = time.process_time()
    for table in reader.read(sample, batch_rows=batch, on_record_error=lambda err: None):
        costs[0].seconds += time.process_time() - t_read
        costs[0].rows_in += table.num_rows
        costs[0].rows_out += table.num_rows
        cpu0 = time.process_time()
        n_in = table.num_rows
        for cost, stage in zip(costs[1:], stages):
            t0 = time.process_time()
            result = stage(table)
            cost.seconds += time.process_time() - t0
            cost.rows_in += table.num_rows
            cost.rows_out += result.table.num_rows
            writer.write(rejects=result.rejects)
            table = result.table
        writer.write(table)
        kept.append(table)
        per_batch.append((n_in, time.process_time() - cpu0, table.nbytes))
        t_read = time.process_time()
    out_bytes, rej_bytes = writer.close()
    read_per_row = costs[0].seconds / max(costs[0].rows_in, 1)
    per_batch = [(n, s + n * read_per_row, b) for n, s, b in per_batch]
    out = pa.concat_tables(kept, promote_options="default") if kept else pa.table({})
    return PassCost(costs, out_bytes, rej_bytes, writer.seconds), out, per_batch


def _global_pass(stages: list, table: pa.Table, tmp: str, k: int, row_group_rows: int, fixed_cold: float
                 ) -> tuple[PassCost, pa.Table]:
    """A pass that starts with a global stage: its build and apply (tiled, scaled back per row), the
    reading of its input shards, the local stages after it, the writing of its output and rejects."""
    stage = stages[0]
    maps = _InProcess()
    result = stage.bind(_build(stage, table, f"{tmp}/real-{k}", maps))(table)  # what it keeps
    big = _tiled(table, GLOBAL_ROWS, getattr(stage.config, "field", None))
    t0 = time.process_time()
    stage.build_fixed()
    fixed = time.process_time() - t0
    t0 = time.process_time()
    work = Location.parse(f"{tmp}/work-{k}")
    stage.bind(_build(stage, big, work.path))(big)
    per_row = table.num_rows / max(big.num_rows, 1)
    seconds = (time.process_time() - t0 - fixed) * per_row
    # _build writes the input shards beside work/, where the build writes its state: only work/ is the stage's
    index = _tree_bytes(work.join("work", "decontam", "index.npz"))
    shuffle = (_tree_bytes(work.join("work")) - index) * per_row
    costs = [StageCost(stage.name, max(seconds, 0.0), table.num_rows, result.table.num_rows, True,
                       int(shuffle), index, max(fixed, fixed_cold), build_pools=maps.maps)]
    writer = _PassWriter(tmp, f"pass-{k}", row_group_rows)
    path = f"{tmp}/pass-{k}-in.parquet"
    pq.write_table(table, path, row_group_size=row_group_rows, compression="zstd")
    t0 = time.process_time()
    pq.read_table(path)  # the pass reads its input shards again
    writer.seconds += time.process_time() - t0
    writer.write(rejects=result.rejects)
    table = result.table
    for local in stages[1:]:  # local stages after the global one run in the same pass
        t0 = time.process_time()
        res = local(table)
        costs.append(StageCost(local.name, time.process_time() - t0, table.num_rows, res.table.num_rows))
        writer.write(rejects=res.rejects)
        table = res.table
    writer.write(table)
    out_bytes, rej_bytes = writer.close()
    return PassCost(costs, out_bytes, rej_bytes, writer.seconds), table


def measure(pipeline, sample: InputFile) -> Sample:
    """Run the pipeline's stages on the sample in this process; see the module docstring."""
    reader = make_reader(pipeline.input.format if sample is not None else "parquet", pipeline.input.options)
    driver_seconds = time.process_time()  # this process so far: interpreter, imports, the pipeline loaded
    floor = _rss()
    build_peak, fixed_cold = 0, {}
    for stage in pipeline.stages:
        if isinstance(stage, GlobalStage):  # first (cold) call: what a run's driver pays once
            t0 = time.process_time()
            build_peak = max(build_peak, _peak_during(stage.build_fixed))
            fixed_cold[stage.name] = time.process_time() - t0
    from .executors.local import stage_modules

    modules = stage_modules(pipeline.stages)
    for name in modules:  # imported once per run (the forkserver), not part of any stage's first call
        __import__(name)
    passes = pipeline.passes()
    tables = list(reader.read(sample, batch_rows=4096, on_record_error=lambda err: None))  # also warms the reader
    with tempfile.TemporaryDirectory(prefix="cidermill-plan-") as tmp:
        out, batches = [], []
        if passes[0] and isinstance(passes[0][0], GlobalStage):  # Parquet input, a global stage first
            table = pa.concat_tables(tables, promote_options="default") if tables else pa.table({})
        else:
            pc0, table, batches = _local_pass(pipeline, reader, sample, passes[0], tables, tmp)
            out.append(pc0)
            passes = passes[1:]
        for stages in passes:
            cost, table = _global_pass(stages, table, tmp, len(out), pipeline.output.row_group_rows,
                                       fixed_cold.get(stages[0].name, 0.0))
            out.append(cost)
        ids = table.column("id").combine_chunks() if "id" in table.schema.names else pa.array([], pa.string())
    server, worker = startup_seconds(modules)
    return Sample(out, sample.location.size(), batches, driver_seconds, server, floor, build_peak,
                  id_check_bytes(ids), worker, cold_caches=caches_written_by_this_process())


def caches_written_by_this_process() -> list[str]:
    """Entries under CIDERMILL_CACHE (two levels: the cache, its files) modified since this process started."""
    import psutil

    from .code.paths import cache_dir

    started = psutil.Process().create_time() - 1.0  # the start time is rounded to the clock's ticks
    found = set()
    for d in cache_dir().iterdir():
        for f in d.iterdir() if d.is_dir() else [d]:
            try:
                if f.stat().st_mtime >= started:
                    found.add(d.name)
            except OSError:
                pass
    return sorted(found)
