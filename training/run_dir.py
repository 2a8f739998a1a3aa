"""A run directory has one writer and one identity, and resumes only from its own checkpoints.

- **One writer**: a run holds `<run dir>/.locks/run.lock` (manifests/locks.py, the data engine's lock: flock on
  a local disk, released by the kernel when the holder dies, kill -9 included) from before it reads a
  checkpoint until its last save. A second run into the same folder stops at once with one line naming the
  holder, instead of interleaving its steps with the first one's.
- **One identity**: what decides the numbers a run produces: its config (less the keys that only say where
  and how often to write or log), the data version, the tokenizer, the initial weights (their content id,
  not the path). Every checkpoint records it. A run refuses a folder holding checkpoints of another
  identity (`--resume auto` would otherwise continue another run's model under this run's name, and a fresh
  run would overwrite it step by step), and `--resume` refuses a checkpoint of another identity, naming the
  keys that differ.
- Interrupted saves are finished or undone first (checkpoint.recover), under the lock.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch.distributed as dist

from manifests.errors import CidermillError, ConfigError, FatalError
from manifests.locks import Lock, LockBusy
from manifests.manifest import canonical_json
from manifests.storage import Location

from . import checkpoint as ckpt

# config keys that change where things are written, how often, or what a run is called; not its numbers
OPERATIONAL = ("name", "out_dir", "log_every", "save_every", "eval_every", "data.cache_dir", "data.root",
               "parallel.gpu_memory", "dpo.cache_dir")


def identity(config: dict, *, data: str, tokenizer: dict | None, init_weights: str | None = None,
             drop: tuple[str, ...] = ()) -> dict:
    """The run identity: {id, config, data, tokenizer, init_weights}; `drop` = more config keys that the
    other fields stand for (a mixture ref stands for its version, `init_from` for the weights' id)."""
    cfg = json.loads(canonical_json(config))
    for key in OPERATIONAL + tuple(drop):
        parts = key.split(".")
        node = cfg
        for p in parts[:-1]:
            node = node.get(p) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(parts[-1], None)
    body = {"config": cfg, "data": data, "tokenizer": ckpt.tokenizer_entry(tokenizer) if tokenizer else None,
            "init_weights": init_weights}
    return {"id": hashlib.sha256(canonical_json(body).encode()).hexdigest()[:16], **body}


def differences(a: dict, b: dict, *, limit: int = 4) -> str:
    """'optim.peak_lr 0.03 vs 0.01, global_batch 16 vs 8' between two identities."""
    fa, fb = _flatten(a), _flatten(b)
    keys = [k for k in sorted(set(fa) | set(fb)) if k != "id" and fa.get(k) != fb.get(k)]
    shown = [f"{k} {fa.get(k)!r} vs {fb.get(k)!r}" for k in keys[:limit]]
    return ", ".join(shown) + (f" (+{len(keys) - limit} more)" if len(keys) > limit else "") or "(none)"


def _flatten(d, prefix: str = "") -> dict:
    out = {}
    for k, v in (d or {}).items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


@dataclass
class RunDir:
    path: Path
    identity: dict
    resume_from: ckpt.CheckpointInfo | None = None
    notes: list[str] = field(default_factory=list)
    _lock: Lock | None = None

    def close(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> "RunDir":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_run(run_dir: str | Path, ident: dict, *, resume: str | Path | None, name: str) -> RunDir:
    """Lock `run_dir`, finish interrupted saves, check the identity of what is there; `resume` = "auto"
    (the newest checkpoint under run_dir, if any), a checkpoint directory, or None (start at step 0).
    Rank 0 decides; every rank gets the same answer or the same error."""
    run = RunDir(Path(run_dir), ident)
    error = None
    if _rank() == 0:
        try:
            run._lock = _lock(run.path, name)
            run.notes = ckpt.recover(run.path)
            _check_folder(run, resume)
        except CidermillError as exc:  # a config, lock or manifest problem: every rank stops with it
            run.close()
            error = exc
    error = _shared(error)
    if error is not None:
        raise error
    run.resume_from = _resume_point(run, resume)
    return run


def _lock(path: Path, name: str) -> Lock:
    path.mkdir(parents=True, exist_ok=True)
    lock = Lock(Location.parse(str(path)), "run", what=f"run directory {path}", wait_s=0)
    try:
        lock.acquire()
    except LockBusy as exc:
        raise FatalError(f"{name}: another run is writing to {path}: {exc}; wait for it, or give this run "
                         "another out_dir") from None
    return lock


def _check_folder(run: RunDir, resume) -> None:
    for path in ckpt.checkpoints(run.path):
        theirs = ckpt.open_checkpoint(path).manifest.get("identity") or {}
        if theirs.get("id") != run.identity["id"]:
            how = "resume from" if resume else "write over"
            raise ConfigError(f"{run.path} holds checkpoints of another run ({path.name}: "
                              f"{differences(run.identity, theirs)}, here vs there); not going to {how} them. "
                              "Give this run another out_dir, or remove that folder")


def _resume_point(run: RunDir, resume) -> ckpt.CheckpointInfo | None:
    if not resume:
        return None
    info = ckpt.latest(run.path) if resume == "auto" else ckpt.open_checkpoint(resume)
    if info is None:
        return None
    theirs = info.manifest.get("identity") or {}
    if theirs.get("id") != run.identity["id"]:
        raise ConfigError(f"--resume {resume}: {info.directory} was saved by another run "
                          f"({differences(run.identity, theirs)}, here vs there); resume it with its own config")
    return info


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def _shared(error: Exception | None) -> Exception | None:
    """Rank 0's error (or None) on every rank."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return error
    box = [error]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def check_distinct_out_dirs(configs) -> None:
    """`train stages`: each stage needs its own out_dir (a later stage would write over the checkpoint it
    starts from)."""
    seen: dict[str, str] = {}
    for cfg in configs:
        key = str(Path(cfg.out_dir).resolve())
        if key in seen:
            raise ConfigError(f"stages {seen[key]} and {cfg.name} share out_dir {cfg.out_dir}; the second would "
                              "write over the checkpoint it starts from. Give each stage its own out_dir")
        seen[key] = cfg.name
