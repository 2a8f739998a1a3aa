"""`cidermill corpus plan`: project a pipeline to a corpus size and a cluster before running it.

    cidermill corpus plan configs/web.yaml --input-bytes 100TB --nodes 64 --cores-per-node 32 --sample x.warc.gz

Measured on the sample (one input file of the pipeline's format; default: the pipeline's first
input), on one core of this machine: every stage's time and rows kept, each global stage's build
time and the bytes its build writes (hash partitions, buckets, edges, signatures: the shuffle) and
its index, and the Parquet bytes of every pass's output. Projected linearly to `--input-bytes`:

- a global stage is timed on the sample tiled to `GLOBAL_ROWS` rows (ids made unique), scaled back
  per row, so a tiny sample's per-file costs are not taken for per-row costs; what it keeps comes
  from the sample itself;
- CPU-hours per stage = sample CPU seconds x (input bytes / sample bytes) / 3600, plus a global
  stage's fixed part (the decontamination index, timed on its own) once; every local stage is warmed
  up on a few rows first, so loading a model is not taken for per-row cost;
- wall time per stage = CPU-hours / (nodes x cores) + for a global stage its shuffle bytes moved
  through the object store at `--node-gbps` per node (every byte written once and read once);
- intermediate storage per pass = its output shards + its global stage's state;
- driver memory = the planning process's own floor + per-task bookkeeping (~`TASK_BYTES` per input
  file of `--task-bytes`) + a broadcast index (decontamination) held once: the global builds send only counts to the
  driver (corpus/dedup/keyed.py, corpus/stages/dedup_minhash.py), so nothing grows with the rows.
The bounding stage is the one with the longest projected wall time. Assumptions are printed with
the numbers: perfect scaling across cores, linear cost in bytes (true for every local stage and for
the hash-partitioned builds; LSH edges grow with the duplicate rate, not the size).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from manifests.config import parse_size
from manifests.errors import ConfigError
from manifests.storage import Location

from .readers import InputFile, make_reader
from .stage import GlobalStage

TASK_BYTES = 4096  # driver bookkeeping per task: its spec, its result (shard list, stats), a marker path
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


@dataclass
class PassCost:
    stages: list[StageCost] = field(default_factory=list)
    output_bytes: int = 0  # Parquet bytes of the pass's output on the sample


class _InProcess:
    """A TaskMap on one core, in this process: the plan measures CPU seconds, not parallelism."""

    workers = 1
    partitions = None

    def map(self, fn, items):
        return [fn(x) for x in items]

    def broadcast(self, value, **_):
        from .stage import InlineShared

        return InlineShared(value)


GLOBAL_ROWS = 20_000


def _tiled(table: pa.Table, rows: int, field: str | None) -> pa.Table:
    """The sample repeated to `rows` rows; ids and the stage's key field made unique per copy (exact
    and URL dedup then see no copies; for MinHash every copy is still a near-duplicate, so its
    cost is an upper bound)."""
    if table.num_rows == 0 or table.num_rows >= rows:
        return table
    reps = -(-rows // table.num_rows)
    out = pa.concat_tables([table] * reps)
    for name in {"id", field} - {None}:
        if name in out.schema.names:
            values = out.column(name).to_pylist()
            out = out.set_column(out.schema.get_field_index(name), name, pa.array(
                [None if v is None else f"{v} {i // table.num_rows}" for i, v in enumerate(values)], pa.string()))
    return out


def _build(stage, table: pa.Table, folder: str):
    """Build `stage` over `table` split in two shards under `folder`; return its state."""
    root = Location.parse(folder)
    root.mkdir()
    half = max(1, table.num_rows // 2)
    shards = []
    for j, part in enumerate((table.slice(0, half), table.slice(half))):
        loc = root.join(f"shard-{j}.parquet")
        pq.write_table(part, loc.path)
        shards.append(loc)
    return stage.build(shards, workdir=root.join("work"), tasks=_InProcess())


def _fixed_seconds(stage: GlobalStage) -> float:
    """CPU seconds a global build spends once whatever the corpus size (`GlobalStage.build_fixed`, e.g. the
    decontamination index built from the benchmarks on the driver); the rest of a build is per-row work."""
    t0 = time.process_time()
    stage.build_fixed()
    return time.process_time() - t0


def _tree_bytes(loc: Location) -> int:
    import pyarrow.fs as pafs

    info = loc.fs.get_file_info(loc.path)
    if info.type != pafs.FileType.Directory:
        return info.size or 0 if info.type == pafs.FileType.File else 0
    infos = loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=True))
    return sum(i.size or 0 for i in infos if i.type == pafs.FileType.File)


def _parquet_bytes(table: pa.Table, path: str) -> int:
    pq.write_table(table, path, compression="zstd")
    return Location.parse(path).size()


def measure(pipeline, sample: InputFile, *, batch_rows: int = 4096) -> tuple[list[PassCost], int]:
    """Run the pipeline's stages on the sample in this process; return per-pass costs and the
    sample's size in bytes."""
    reader = make_reader(pipeline.input.format if sample is not None else "parquet", pipeline.input.options)
    list(reader.read(sample, batch_rows=batch_rows, on_record_error=lambda err: None))  # warm-up
    t0 = time.process_time()  # CPU time: a busy machine does not inflate the rates
    tables = list(reader.read(sample, batch_rows=batch_rows, on_record_error=lambda err: None))
    read_s = time.process_time() - t0
    table = pa.concat_tables(tables, promote_options="default") if tables else pa.table({})
    passes = [PassCost(stages=[StageCost("read", read_s, table.num_rows, table.num_rows)])]
    with tempfile.TemporaryDirectory(prefix="cidermill-plan-") as tmp:
        for k, stage in enumerate(pipeline.stages):
            rows_in = table.num_rows
            if isinstance(stage, GlobalStage):
                passes[-1].output_bytes = _parquet_bytes(table, f"{tmp}/pass-{k}.parquet")
                result = stage.bind(_build(stage, table, f"{tmp}/real-{k}"))(table)  # what it keeps
                # the cost on at least GLOBAL_ROWS rows (the sample tiled, ids made unique), so the
                # per-file costs of a tiny sample are not taken for per-row costs
                big = _tiled(table, GLOBAL_ROWS, getattr(stage.config, "field", None))
                fixed = _fixed_seconds(stage)
                t0 = time.process_time()
                work = Location.parse(f"{tmp}/work-{k}")
                stage.bind(_build(stage, big, work.path))(big)
                seconds = (time.process_time() - t0 - fixed) * table.num_rows / max(big.num_rows, 1)
                index = _tree_bytes(work.join("decontam", "index.npz"))
                shuffle = (_tree_bytes(work) - index) * table.num_rows / max(big.num_rows, 1)
                cost = StageCost(stage.name, max(seconds, 0.0), rows_in, result.table.num_rows, True,
                                 int(shuffle), index, fixed)
                passes.append(PassCost(stages=[cost]))
            else:
                stage(table.slice(0, min(table.num_rows, 8)))  # warm up: models and tables load on first use
                t0 = time.process_time()
                result = stage(table)
                cost = StageCost(stage.name, time.process_time() - t0, rows_in, result.table.num_rows)
                passes[-1].stages.append(cost)
            table = result.table
        passes[-1].output_bytes = _parquet_bytes(table, f"{tmp}/final.parquet")
    return passes, sample.location.size()


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"


def _fmt_hours(h: float) -> str:
    return f"{h * 60:.1f} min" if h < 1 else f"{h:.1f} h"


def project(passes: list[PassCost], sample_bytes: int, *, input_bytes: float, nodes: int, cores: int,
            node_gbps: float, driver_floor_bytes: int, task_bytes: float) -> dict:
    scale = input_bytes / max(sample_bytes, 1)
    n_tasks = max(1, int(-(-input_bytes // task_bytes)))  # one task per input file
    bandwidth = nodes * node_gbps * 1e9 / 8  # bytes/s into and out of the object store, all nodes
    rows, out_passes, index_bytes = [], [], 0
    for k, pc_ in enumerate(passes):
        pass_state = 0
        for st in pc_.stages:
            cpu_h = (st.seconds * scale + st.fixed_seconds) / 3600
            shuffle = st.shuffle_bytes * scale
            wall_h = (st.seconds * scale / (nodes * cores) + st.fixed_seconds) / 3600 \
                + (2 * shuffle / bandwidth / 3600 if st.is_global else 0)
            index_bytes += st.index_bytes
            pass_state += shuffle + st.index_bytes
            rows.append({"pass": k, "stage": st.name, "rows_per_core_s": st.rows_in / st.seconds if st.seconds else
                         float("nan"), "rows": st.rows_in * scale, "kept": st.rows_out / max(st.rows_in, 1),
                         "cpu_h": cpu_h, "wall_h": wall_h, "shuffle_bytes": shuffle, "index_bytes": st.index_bytes})
        out_passes.append({"pass": k, "output_bytes": pc_.output_bytes * scale, "state_bytes": pass_state})
    bound = max(rows, key=lambda r: r["wall_h"])
    driver = driver_floor_bytes + n_tasks * TASK_BYTES + 2 * index_bytes
    return {"scale": scale, "tasks": n_tasks, "stages": rows, "passes": out_passes, "bound": bound["stage"],
            "wall_h": sum(r["wall_h"] for r in rows), "cpu_h": sum(r["cpu_h"] for r in rows),
            "driver_bytes": driver}


def render(plan: dict, *, input_bytes: float, nodes: int, cores: int, node_gbps: float, sample: str,
           sample_bytes: int) -> str:
    lines = [f"plan for {_fmt_bytes(input_bytes)} of input on {nodes} nodes x {cores} cores "
             f"(sample {sample}, {_fmt_bytes(sample_bytes)}; x{plan['scale']:.3g}; {plan['tasks']:,} tasks)", "",
             f"{'pass':>4} {'stage':28} {'rows/core/s':>12} {'rows':>10} {'kept':>6} {'CPU-hours':>11} "
             f"{'wall':>10} {'shuffle':>10}"]
    for r in plan["stages"]:
        lines.append(f"{r['pass']:>4} {r['stage']:28} {r['rows_per_core_s']:>12,.0f} {r['rows']:>10.3g} "
                     f"{r['kept']:>6.1%} {r['cpu_h']:>11,.1f} {_fmt_hours(r['wall_h']):>10} "
                     f"{_fmt_bytes(r['shuffle_bytes']) if r['shuffle_bytes'] else '-':>10}")
    lines.append("")
    for p in plan["passes"]:
        lines.append(f"pass {p['pass']}: intermediate storage {_fmt_bytes(p['output_bytes'] + p['state_bytes'])} "
                     f"(output shards {_fmt_bytes(p['output_bytes'])}, global-stage state {_fmt_bytes(p['state_bytes'])})")
    lines += ["",
              f"total: {plan['cpu_h']:,.0f} CPU-hours, wall {_fmt_hours(plan['wall_h'])}",
              f"driver memory: {_fmt_bytes(plan['driver_bytes'])} (flat in rows: global builds send the driver "
              f"counts only; grows with tasks at ~{TASK_BYTES} B each)",
              f"bounded by: {plan['bound']}",
              f"assumes: linear cost in input bytes, perfect scaling over {nodes * cores:,} cores, "
              f"{node_gbps:g} Gbit/s per node to the object store for shuffles, rates of this machine's cores"]
    return "\n".join(lines)


def cmd_plan(args) -> int:
    import resource

    from .pipeline import load_pipeline

    pipeline = load_pipeline(args.pipeline)
    for name, value in (("--nodes", args.nodes), ("--cores-per-node", args.cores_per_node)):
        if value < 1:
            raise ConfigError(f"{name} must be >= 1; got {value}")
    input_bytes = parse_size(args.input_bytes, key="--input-bytes", where="the command line")
    if args.sample:
        loc = Location.parse(args.sample)
        if not loc.exists():
            raise ConfigError(f"--sample {args.sample}: no such file")
        sample = InputFile(loc, loc.name)
    else:
        inputs = pipeline.inputs()
        if not inputs:
            raise ConfigError(f"{args.pipeline}: no input files to sample; pass --sample FILE")
        sample = inputs[0]
    floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    passes, sample_bytes = measure(pipeline, sample)
    plan = project(passes, sample_bytes, input_bytes=input_bytes, nodes=args.nodes, cores=args.cores_per_node,
                   node_gbps=args.node_gbps, driver_floor_bytes=floor, task_bytes=parse_size(args.task_bytes, key="--task-bytes", where="the command line"))
    print(render(plan, input_bytes=input_bytes, nodes=args.nodes, cores=args.cores_per_node,
                 node_gbps=args.node_gbps, sample=sample.location.uri, sample_bytes=sample_bytes))
    return 0


def add_subcommand(csub) -> None:
    plan = csub.add_parser("plan", help="project wall time, CPU-hours, driver memory and storage to a corpus size")
    plan.add_argument("pipeline", help="pipeline YAML file")
    plan.add_argument("--input-bytes", required=True, help="input size to plan for, e.g. 100TB or 424.7TiB")
    plan.add_argument("--nodes", type=int, required=True)
    plan.add_argument("--cores-per-node", type=int, required=True)
    plan.add_argument("--sample", help="one input file to measure on (default: the pipeline's first input)")
    plan.add_argument("--node-gbps", type=float, default=10.0, help="per-node bandwidth to the object store")
    plan.add_argument("--task-bytes", default="1GB", help="input bytes per task (one input file; a CC WARC is ~1GB)")
    plan.set_defaults(func=cmd_plan)
