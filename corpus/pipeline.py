"""Pipelines declared in YAML, validated into typed configs before any work starts.

    name: c4-clean                      # output dataset name
    input:  {format: jsonl, paths: [data/samples/c4/*.jsonl.gz], options: {text_field: text}}
    output: {root: data/root, shard_target_bytes: 256MiB, rejects: true}
    executor: {kind: local, workers: 2, batch_rows: 2048}
    stages:
      - normalize_text_v1: {form: NFC}
      - text_length_v1: {min_chars: 200}
"""

from __future__ import annotations

import errno
import glob
import os
import posixpath
import stat
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa
import pyarrow.fs as pafs

from manifests.catalog import Catalog
from manifests.config import build_config, check_keys, parse_size, require
from manifests.overrides import apply_overrides, read_yaml
from manifests.errors import ConfigError
from manifests.names import validate_name
from manifests.manifest import canonical_json, config_hash
from manifests.storage import Location

from .readers import DIRECTORY_FORMATS, InputFile, make_reader
from .registry import stage_class
from .stage import GlobalStage, Stage


# Bounds on counts a typo could blow up (`batch_rows: 1e20` means one batch of every row): one line, before work.
MAX_BATCH_ROWS = 1 << 24
MAX_WORKERS = 1 << 16


@dataclass(frozen=True, kw_only=True)
class InputSpec:
    format: str = "parquet"  # a key of corpus.readers.READERS (jsonl, parquet, warc, ...)
    paths: list[str] = field(default_factory=list)  # files, globs or URIs
    version: str | None = None  # a catalog reference (`name`, `name@id`); reads its shards
    options: dict[str, Any] = field(default_factory=dict)  # the reader's own config
    cast: dict[str, str] = field(default_factory=dict)  # column -> Arrow type (`string`, `int64`), applied on read

    def __post_init__(self):
        require(bool(self.paths) != bool(self.version), "input needs exactly one of `paths` or `version`")
        require(not self.version or self.format == "parquet", "input.version reads Parquet shards; set format: parquet")
        for column, type_name in self.cast.items():
            try:
                pa.type_for_alias(type_name)
            except (ValueError, KeyError):
                raise ValueError(f"cast: {column}: {type_name!r} is not an Arrow type name "
                                 "(e.g. string, large_string, int64, float64)") from None


@dataclass(frozen=True, kw_only=True)
class OutputSpec:
    root: str = "data/root"  # the catalog's data root (local path or URI)
    shard_target_bytes: int | str = "256MiB"
    row_group_rows: int = 4096
    rejects: bool = True  # write dropped rows to `<name>.rejects`
    unique_ids: Literal["error", "drop", "off"] = "error"  # duplicate `id`s: refuse, drop (reason duplicate_id), allow

    def __post_init__(self):
        require(0 < self.row_group_rows <= MAX_BATCH_ROWS,
                f"row_group_rows must be between 1 and {MAX_BATCH_ROWS:,}; got {self.row_group_rows}")
        size = parse_size(self.shard_target_bytes, key="shard_target_bytes", where="output")
        require(size > 0, f"shard_target_bytes must be > 0 (e.g. 256MiB); got {self.shard_target_bytes!r}")


@dataclass(frozen=True, kw_only=True)
class ExecutorSpec:
    kind: Literal["local", "ray"] = "local"
    workers: int = 0  # 0 = one per CPU core (ray: every CPU of the cluster)
    batch_rows: int = 2048
    max_task_retries: int = 1  # for RetryableError
    address: str | None = None  # ray: cluster address; None = a local Ray instance
    connect_timeout_s: float = 15.0  # ray: give up on an unreachable `address` after this long
    lock_wait_s: float | None = None  # wait this long for an identical run / a publish of the name (None: forever)
    ship_code: bool = True  # ray with `address`: send this checkout's packages to the nodes (runtime_env py_modules)
    runtime_env: dict[str, Any] = field(default_factory=dict)  # ray: more runtime_env keys (env_vars, pip, ...)

    def __post_init__(self):
        require(0 <= self.workers <= MAX_WORKERS, f"workers must be between 0 (all cores) and {MAX_WORKERS:,}; "
                f"got {self.workers}")
        require(0 < self.batch_rows <= MAX_BATCH_ROWS,
                f"batch_rows must be between 1 and {MAX_BATCH_ROWS:,}; got {self.batch_rows}")
        require(0 <= self.max_task_retries <= 100, f"max_task_retries must be between 0 and 100; got "
                f"{self.max_task_retries}")
        require(0 < self.connect_timeout_s <= 86400, f"connect_timeout_s must be > 0 and at most a day (86400); "
                f"got {self.connect_timeout_s}")
        require(self.lock_wait_s is None or self.lock_wait_s >= 0,
                f"lock_wait_s must be >= 0 (or null: wait as long as it takes); got {self.lock_wait_s}")

    @property
    def n_workers(self) -> int:
        return self.workers or os.cpu_count() or 1


@dataclass(frozen=True)
class Pipeline:
    name: str
    input: InputSpec
    output: OutputSpec
    executor: ExecutorSpec
    stages: list[Stage]
    parents: list[str] = field(default_factory=list)  # input version ids
    source: str | None = None  # the YAML file it was loaded from (for error messages; not part of the run key)

    @property
    def target_bytes(self) -> int:
        return parse_size(self.output.shard_target_bytes, key="shard_target_bytes", where="output")

    def canonical(self) -> dict:
        """Everything that decides the output bytes; its hash keys the run (for resume)."""
        return {
            "name": self.name,
            "input": {"format": self.input.format, "options": self.input.options,
                      "paths": list(self.input.paths), "version": self.input.version},
            "output": {"shard_target_bytes": self.target_bytes, "row_group_rows": self.output.row_group_rows,
                       "rejects": self.output.rejects},
            "stages": [s.describe() for s in self.stages],
        } | self._safety_canonical()

    def _safety_canonical(self) -> dict:
        # Only when set, so that configs without them keep their hashes.
        extra = {}
        if self.input.cast:
            extra["cast"] = dict(sorted(self.input.cast.items()))
        if self.output.unique_ids == "drop":
            extra["unique_ids"] = "drop"
        return extra

    def catalog(self) -> Catalog:
        return Catalog(self.output.root)

    def inputs(self) -> list[InputFile]:
        return resolve_inputs(self)

    def run_key(self, inputs: list[InputFile]) -> str:
        files = [(f.key, _dir_size(f.location) if f.location.is_dir() else f.location.size()) for f in inputs]
        return config_hash({"pipeline": self.canonical(), "inputs": files})

    def passes(self) -> list[list[Stage]]:
        """Split the stage list at global stages: each pass starts with at most one."""
        out: list[list[Stage]] = [[]]  # a pipeline without stages is one pass that copies
        if self.stages and isinstance(self.stages[0], GlobalStage) and self.input.format != "parquet":
            out.append([])  # a global index reads Parquet: first copy the input into shards
        for stage in self.stages:
            if isinstance(stage, GlobalStage) and out[-1]:
                out.append([])
            out[-1].append(stage)
        return out


def parse_stage_list(items: Any, where: str) -> list[Stage]:
    if items is None:
        items = []  # no stages: a plain copy / re-shard into a new version
    if not isinstance(items, list):
        raise ConfigError(f"{where}: `stages` must be a list like `- text_length_v1: {{min_chars: 200}}`")
    stages = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            name, options = item, {}
        elif isinstance(item, dict) and len(item) == 1:
            (name, options), = item.items()
        else:
            raise ConfigError(f"{where}: stages[{i}] must be `stage_name: {{options}}` (one key); got {item!r}")
        cls = stage_class(name)
        try:
            stages.append(cls(options or {}))
        except ConfigError as exc:  # name the file too: "... in stage text_length_v1 (configs/x.yaml stages[2])"
            raise ConfigError(f"{exc} ({where} stages[{i}])") from None
    return stages


def load_pipeline(source: str | dict, *, overrides: dict | list[str] | None = None) -> Pipeline:
    """Load and validate a pipeline from a YAML path or a mapping; nothing runs here.

    `overrides`: dotted keys (`{"executor.workers": 4}`) or `--set` strings (`["stages.text_length_v1.min_words=30"]`),
    applied before validation so they are checked like the YAML."""
    if isinstance(source, dict):
        data, where = dict(source), "pipeline"
    else:
        data, where = read_yaml(source, what="pipeline"), str(source)
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: a pipeline is a mapping with name, input, output, executor, stages")
    data = apply_overrides(data, overrides or {}, where=where)
    check_keys(data, ("name", "input", "output", "executor", "stages"), where=where)
    name = validate_name(data.get("name"), where=f"{where}: `name`")
    pipeline = Pipeline(
        name=name,
        input=build_config(InputSpec, data.get("input"), where=f"{where} input"),
        output=build_config(OutputSpec, data.get("output"), where=f"{where} output"),
        executor=build_config(ExecutorSpec, data.get("executor"), where=f"{where} executor"),
        stages=parse_stage_list(data.get("stages"), where),
        source=None if isinstance(source, dict) else str(source),
    )
    parse_size(pipeline.output.shard_target_bytes, key="shard_target_bytes", where=f"{where} output")
    make_reader(pipeline.input.format, pipeline.input.options)  # validates reader options now
    return pipeline


def resolve_inputs(pipeline: Pipeline) -> list[InputFile]:
    """Expand globs / a catalog version into an ordered list of input files with stable keys."""
    spec = pipeline.input
    if spec.version:
        version = pipeline.catalog().resolve(spec.version)
        ref = f"{version.name}@{version.version_id}"
        return [InputFile(loc, f"{version.name}@{version.version_id[:12]}/{posixpath.basename(loc.path)}",
                          sha256=info.sha256, rows=info.rows, version=ref)
                for info, loc in zip(version.manifest.shards, version.shard_locations())]
    locs: list[Location] = []
    for pattern in spec.paths:
        if "://" in pattern:  # listed through the store's filesystem (query options such as endpoint_override kept)
            matched = Location.parse(pattern).glob()
        else:
            matched = [_local_input(p, spec.format) for p in sorted(glob.glob(os.path.expanduser(pattern)))]
        if not matched:
            raise ConfigError(f"input.paths: {pattern!r} matches no file{_relative_hint(pattern, pipeline.source)}")
        locs.extend(matched)
    seen, unique = set(), []
    for loc in locs:
        if loc.path not in seen:
            seen.add(loc.path)
            unique.append(loc)
    unique.sort(key=lambda loc: loc.path)
    common = posixpath.commonpath([posixpath.dirname(loc.path) for loc in unique]) if unique else ""
    return [InputFile(loc, posixpath.relpath(loc.path, common) if common else loc.path) for loc in unique]


def _local_input(path: str, fmt: str) -> Location:
    """A matched local path, refused in one line unless the reader can read it: a dangling symlink, a symlink
    loop, an unreadable file, a fifo or device, or a directory for a format that reads files."""
    try:
        st = os.stat(path)  # follows symlinks
    except OSError as exc:
        if os.path.islink(path) and exc.errno == errno.ENOENT:
            raise ConfigError(f"input.paths: {path} is a symlink to {os.readlink(path)!r}, which does not exist") \
                from None
        if exc.errno == errno.ELOOP:
            raise ConfigError(f"input.paths: {path} is a symlink loop (it points back to itself)") from None
        raise ConfigError(f"input.paths: cannot read {path} ({exc.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        if fmt not in DIRECTORY_FORMATS:
            raise ConfigError(f"input.paths: {path} is a directory, and format {fmt!r} reads files; match the files "
                              f"inside it, e.g. {os.path.join(path, '*')}")
    elif not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"input.paths: {path} is not a regular file (a fifo, socket or device)")
    if not os.access(path, os.R_OK | (os.X_OK if stat.S_ISDIR(st.st_mode) else 0)):
        raise ConfigError(f"input.paths: cannot read {path} (permission denied)")
    return Location.parse(path)


def _relative_hint(pattern: str, source: str | None) -> str:
    """Relative paths in a pipeline resolve against the working directory (like paths typed on the
    command line; the configs in configs/ are written for the repository root). Say so, and say
    where the path would have matched if it was meant relative to the YAML file."""
    if "://" in pattern or os.path.isabs(os.path.expanduser(pattern)):
        return ""
    hint = (f" (relative paths resolve against the working directory {os.getcwd()}, not the pipeline file's "
            f"folder; run from the folder they are relative to, e.g. the repository root for configs/, or use "
            f"absolute paths)")
    if source:
        beside = os.path.join(os.path.dirname(os.path.abspath(source)), pattern)
        if glob.glob(os.path.expanduser(beside)):
            hint += f"; it does match relative to {source}'s folder: {beside}"
    return hint


def _dir_size(loc: Location) -> list[int]:
    """[bytes, files] of a directory input (a folder of repositories, `format: repos`), so that a
    change inside it changes the run key (a directory has no size of its own)."""
    files = [i for i in loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=True))
             if i.type == pafs.FileType.File]
    return [sum(i.size or 0 for i in files), len(files)]


def describe_plan(pipeline: Pipeline) -> str:
    inputs = pipeline.inputs()
    from .preflight import preflight

    preflight(pipeline, inputs)  # the dry run refuses what the real run would refuse
    total = sum(_dir_size(f.location)[0] if f.location.is_dir() else f.location.size() for f in inputs)
    lines = [
        f"pipeline {pipeline.name}: {len(inputs)} input files ({total / 1e6:.1f} MB, format {pipeline.input.format})",
        f"executor: {pipeline.executor.kind}, "
        f"{'every cluster CPU as' if pipeline.executor.kind == 'ray' and not pipeline.executor.workers else pipeline.executor.n_workers} "
        f"workers, batch {pipeline.executor.batch_rows} rows",
        f"output: {pipeline.catalog().root.uri}/{pipeline.name}/<version id>  "
        f"(shards up to {pipeline.target_bytes / 2**20:.0f} MiB, rejects {'on' if pipeline.output.rejects else 'off'})",
        f"run key: {pipeline.run_key(inputs)[:16]} (a rerun with the same key reuses finished tasks whose input "
        "bytes are unchanged)",
    ]
    for p, stages in enumerate(pipeline.passes()):
        lines.append(f"pass {p}:")
        for s in stages:
            kind = "global" if isinstance(s, GlobalStage) else type(s).__mro__[1].__name__.lower()
            lines.append(f"  - {s.name} [{kind}] {canonical_json(s.config_dict())}")
    lines.append("inputs:")
    lines += [f"  {i:5d} {f.key}" for i, f in enumerate(inputs[:20])]
    if len(inputs) > 20:
        lines.append(f"  ... {len(inputs) - 20} more")
    return "\n".join(lines)
