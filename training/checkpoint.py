"""Checkpoints: weights, optimizer state, RNG and data position, committed atomically with a manifest that
hashes every file, as a dataset version is.

Layout of one checkpoint directory (`<run dir>/step-NNNNNNN`, or any folder for a one-off checkpoint):
    model.pt | model/        weights: a plain state dict on CPU; megatron-core distributed checkpoint on GPU
    optim/rank-00000.pt      this rank's optimizer state, RNG states: torch CPU and CUDA, megatron's CUDA RNG
                             tracker, Python and numpy (resume needs the same parallel layout)
    tokenizer/<file>         the tokenizer model the run trained with (none for the byte tokenizer), so
                             evaluation and export never look it up elsewhere
    <name>.pt                recipe files (`files=`: MDLOO's policy versions)
    checkpoint.json          the manifest, written last: format, step, data, config, run identity, the
                             tokenizer entry, and `files` = {relative path: {bytes, sha256}} of every other file

Writing (`save`): everything goes into `<parent>/.<name>.partial/`, the manifest last (fsynced), and the
folder is then renamed onto `<name>`; a checkpoint already there is first moved aside to `.<name>.old-*`
and deleted after. A kill at any moment leaves the old checkpoint or the new one, never a mix of the two
(`recover` finishes or undoes an interrupted rename). Only one process writes into a run directory: the
trainers hold its lock (training/run_dir.py).

Reading: `open_checkpoint` checks the format; `load_weights`, `load_training_state` and `load_file` check
the size and sha256 of the files they read against the manifest before torch reads them, and weights must
be finite; `verify` checks every file. A mismatch is a ManifestError naming the file.

The API other code builds on (an HF import writes a checkpoint through `save`; anything that evaluates or
exports opens one):
    info = open_checkpoint(path)            # a checkpoint dir, or a run dir (its newest checkpoint)
    model, info = load_model(path, seq_length=S)
    load_weights(info, model); load_training_state(info, optimizer)
    checkpoint_tokenizer(info) -> entry; load_checkpoint_tokenizer(info) -> encode/decode object
    weights_id(info)                        # content id of the weights (stable across re-saves)
    save(directory, model=..., optimizer=..., manifest={...}, tokenizer=(entry, file), files={...})
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from manifests.errors import ConfigError, ManifestError
from manifests.manifest import canonical_json
from manifests.storage import Location

CHECKPOINT_MANIFEST = "checkpoint.json"
FORMAT_VERSION = 2  # 2: `files` hashes every file; 1 (no hashes) is refused (`cidermill train seal` upgrades)
PARTIAL = ".partial"


@dataclass
class CheckpointInfo:
    directory: Path
    manifest: dict

    @property
    def step(self) -> int:
        return int(self.manifest["step"])


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def _use_dist_checkpointing() -> bool:
    return torch.cuda.is_available()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _hash(path: Path) -> tuple[str, int]:
    """(sha256, bytes) of a file, after flushing it to disk (files other ranks wrote included)."""
    with open(path, "rb") as f:
        os.fsync(f.fileno())
    return Location.parse(str(path)).sha256()


# ---- writing ---------------------------------------------------------------------------------------------
def save(directory: str | Path, *, model, optimizer=None, manifest: dict, tokenizer: tuple[dict, str] | None = None,
         files: dict[str, object] | None = None) -> Path:
    """Write a checkpoint atomically (see the module docstring). `tokenizer` = (entry, model file or None):
    the file is copied in and the entry recorded (a Hugging Face tokenizer.json brings the files of its
    folder the entry's `hf_files` names: its config and chat template); `files` = extra objects, torch.save'd
    under those names."""
    directory = Path(directory)
    partial = directory.parent / f".{directory.name}{PARTIAL}"
    if _rank() == 0:
        directory.parent.mkdir(parents=True, exist_ok=True)
        if partial.exists():  # a save that was killed: start it over
            shutil.rmtree(partial)
        partial.mkdir()
    _barrier()
    if _use_dist_checkpointing():
        from megatron.core import dist_checkpointing

        (partial / "model").mkdir(exist_ok=True)
        dist_checkpointing.save(model.sharded_state_dict(), str(partial / "model"))
    elif _rank() == 0:
        torch.save(model.state_dict(), partial / "model.pt")
    if optimizer is not None:
        (partial / "optim").mkdir(exist_ok=True)
        state = {"optimizer": optimizer.state_dict(), "rng_cpu": torch.get_rng_state(),
                 "rng_cuda": torch.cuda.get_rng_state() if torch.cuda.is_available() else None,
                 "rng_tracker": _tracker_states(), "rng_python": random.getstate(),
                 "rng_numpy": np.random.get_state()}
        torch.save(state, partial / "optim" / f"rank-{_rank():05d}.pt")
    entry = None
    if _rank() == 0:
        for rel, obj in (files or {}).items():
            torch.save(obj, partial / rel)
        if tokenizer is not None:
            entry, source = tokenizer
            entry = dict(entry, file=None)
            if source:
                (partial / "tokenizer").mkdir()
                entry["file"] = f"tokenizer/{Path(source).name}"
                shutil.copyfile(source, partial / entry["file"])
                for name in entry.get("hf_files") or {}:
                    if name != Path(source).name:
                        shutil.copyfile(Path(source).parent / name, partial / "tokenizer" / name)
    _barrier()
    if _rank() == 0:
        hashed = {}
        for path in sorted(p for p in partial.rglob("*") if p.is_file()):
            sha, n = _hash(path)
            hashed[path.relative_to(partial).as_posix()] = {"bytes": n, "sha256": sha}
        body = {"format_version": FORMAT_VERSION, "saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "weights": "dist_checkpointing" if _use_dist_checkpointing() else "state_dict", **manifest,
                "files": hashed}
        if entry is not None:
            body["tokenizer"] = entry
        _write_manifest(partial, body)
        commit_dir(partial, directory)
    _barrier()
    return directory


def _write_manifest(directory: Path, body: dict) -> None:
    tmp = directory / (CHECKPOINT_MANIFEST + ".tmp")
    with open(tmp, "w") as f:
        f.write(json.dumps(json.loads(canonical_json(body)), indent=2))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / CHECKPOINT_MANIFEST)
    _fsync_dir(directory)


def commit_dir(partial: Path, directory: Path) -> None:
    """Rename the finished folder `partial` onto `directory`; what is there is moved aside first and deleted
    after, so a reader sees the old folder or the new one, whole (checkpoints, adapters, exports, results)."""
    old = None
    if directory.exists():
        old = directory.parent / f".{directory.name}.old-{uuid.uuid4().hex[:8]}"
        os.rename(directory, old)
    os.rename(partial, directory)
    _fsync_dir(directory.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def recover(parent: str | Path) -> list[str]:
    """Finish or undo checkpoint saves a kill interrupted under `parent` (call it holding the writer's lock):
    a complete `.X.partial` whose rename did not happen becomes X; an `.X.old-*` whose replacement never
    arrived becomes X again; leftovers are deleted. Returns what was done, for the log."""
    parent = Path(parent)
    done = []
    if not parent.is_dir():
        return done
    for p in sorted(parent.glob(f".*{PARTIAL}")):
        target = parent / p.name[1: -len(PARTIAL)]
        if not target.exists() and (p / CHECKPOINT_MANIFEST).exists():
            os.rename(p, target)
            done.append(f"completed the interrupted save of {target.name}")
        else:
            shutil.rmtree(p, ignore_errors=True)
            done.append(f"removed the unfinished save {p.name}")
    for p in sorted(parent.glob(".*.old-*")):
        target = parent / p.name[1:].rsplit(".old-", 1)[0]
        if not target.exists() and (p / CHECKPOINT_MANIFEST).exists():
            os.rename(p, target)
            done.append(f"restored {target.name} (its replacement was interrupted)")
        else:
            shutil.rmtree(p, ignore_errors=True)
    return done


def seal(directory: str | Path) -> Path:
    """Upgrade a format-1 checkpoint (no file hashes) in place: hash its files as they are now. Only for
    checkpoints you trust: whatever the files hold now is what later loads will accept."""
    directory = Path(directory)
    path = directory / CHECKPOINT_MANIFEST
    body = _read_manifest(path)
    if body.get("format_version") != 1:
        raise ManifestError(f"{path}: format_version {body.get('format_version')!r}; only format 1 needs sealing")
    body["files"] = {p.relative_to(directory).as_posix(): dict(zip(("sha256", "bytes"), _hash(p)))
                     for p in sorted(directory.rglob("*")) if p.is_file() and p.name != CHECKPOINT_MANIFEST}
    body["format_version"] = FORMAT_VERSION
    _write_manifest(directory, body)
    return directory


# ---- reading ---------------------------------------------------------------------------------------------
def _read_manifest(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}: not valid JSON ({exc})") from None


def open_checkpoint(directory: str | Path) -> CheckpointInfo:
    """A checkpoint directory, or a run directory (then its newest finished `step-*` checkpoint)."""
    directory = Path(directory)
    if not (directory / CHECKPOINT_MANIFEST).exists() and directory.is_dir():
        found = latest(directory)
        if found is not None:
            return found
    path = directory / CHECKPOINT_MANIFEST
    if not path.exists():
        raise ManifestError(f"{directory}: no {CHECKPOINT_MANIFEST}; not a finished checkpoint")
    manifest = _read_manifest(path)
    version = manifest.get("format_version")
    if version == 1:
        raise ManifestError(f"{path}: checkpoint format 1 has no file hashes, so it cannot be verified; if you "
                            f"trust its files, run `cidermill train seal {directory}`")
    if version != FORMAT_VERSION:
        raise ManifestError(f"{path}: unknown checkpoint format_version {version!r}")
    if not isinstance(manifest.get("files"), dict):
        raise ManifestError(f"{path}: no `files` entry; the manifest was edited")
    return CheckpointInfo(directory, manifest)


_verified: dict[tuple, bool] = {}  # (file, size, mtime_ns, sha256) already checked in this process


def _check_file(info: CheckpointInfo, rel: str) -> str | None:
    """The problem with one listed file, or None when it matches its manifest entry."""
    entry = info.manifest["files"].get(rel)
    path = info.directory / rel
    if entry is None:
        return f"{rel} is not listed in the manifest"
    if not path.is_file():
        return f"{rel} is missing"
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, entry["sha256"])
    if key in _verified:
        return None
    if st.st_size != entry["bytes"]:
        return f"{rel} has {st.st_size} bytes, the manifest says {entry['bytes']}"
    sha, _ = _hash(path)
    if sha != entry["sha256"]:
        return f"{rel} sha256 {sha[:12]} != manifest {entry['sha256'][:12]}"
    _verified[key] = True
    return None


def require_intact(info: CheckpointInfo, rels) -> None:
    """Raise ManifestError naming the first file of `rels` that does not match the manifest."""
    for rel in rels:
        problem = _check_file(info, rel)
        if problem:
            raise ManifestError(f"checkpoint {info.directory}: {problem}; it was changed or damaged after "
                                "saving, so it is not loaded")


def verify(info: CheckpointInfo) -> list[str]:
    """Every listed file checked (size and sha256); the problems, empty when the checkpoint is intact."""
    return [p for rel in sorted(info.manifest["files"]) if (p := _check_file(info, rel))]


def _weight_files(info: CheckpointInfo) -> list[str]:
    files = [r for r in info.manifest["files"] if r == "model.pt" or r.startswith("model/")]
    if not files:
        raise ManifestError(f"checkpoint {info.directory}: the manifest lists no weight files")
    return sorted(files)


def weights_id(info: CheckpointInfo) -> str:
    """16 hex digits over the weight files' hashes: the same weights give the same id, whenever saved."""
    h = hashlib.sha256()
    for rel in _weight_files(info):
        h.update(f"{rel}:{info.manifest['files'][rel]['sha256']}".encode())
    return h.hexdigest()[:16]


def load_weights(info: CheckpointInfo, model, *, strict: bool = True) -> None:
    """Verified weights into `model`; non-finite weights are refused (they would train silently on NaN)."""
    require_intact(info, _weight_files(info))
    if info.manifest["weights"] == "dist_checkpointing":
        from megatron.core import dist_checkpointing

        state = dist_checkpointing.load(model.sharded_state_dict(), str(info.directory / "model"))
        model.load_state_dict(state, strict=strict)
        require_finite(model.state_dict(), where=str(info.directory))
        return
    state = torch.load(info.directory / "model.pt", map_location="cpu", weights_only=True)
    require_finite(state, where=str(info.directory))
    load_state_dict_(model, state, strict=strict)


def require_finite(state: dict, *, where: str) -> None:
    for k, v in state.items():
        if torch.is_tensor(v) and v.is_floating_point() and not bool(torch.isfinite(v).all()):
            raise ManifestError(f"{where}: weight {k} holds NaN or infinite values; not loading it")


def load_state_dict_(model, state: dict, *, strict: bool = True) -> None:
    """Load a plain state dict, ignoring megatron's `_extra_state` entries (no tensors, TE bookkeeping)."""
    state = {k: v for k, v in state.items() if not k.endswith("_extra_state")}
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # a shape mismatch: another model shape
        raise ManifestError(f"checkpoint does not fit the model: {str(exc).splitlines()[-1].strip()}") from None
    missing = [k for k in missing if not k.endswith("_extra_state")]
    if strict and (missing or unexpected):
        raise ManifestError(f"checkpoint does not fit the model: missing {missing[:5]}, unexpected {unexpected[:5]}")


def load_training_state(info: CheckpointInfo, optimizer) -> None:
    rel = f"optim/rank-{_rank():05d}.pt"
    if rel not in info.manifest["files"]:
        raise ManifestError(f"{info.directory / rel} is missing: resume needs the same number of ranks as the "
                            "saved run")
    require_intact(info, [rel])
    state = torch.load(info.directory / rel, map_location="cpu", weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng_cpu"])
    if state.get("rng_cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["rng_cuda"])
    if state.get("rng_tracker"):
        from megatron.core import tensor_parallel

        tensor_parallel.get_cuda_rng_tracker().set_states(state["rng_tracker"])
    if "rng_python" in state:
        random.setstate(state["rng_python"])
        np.random.set_state(state["rng_numpy"])


def load_file(info: CheckpointInfo, rel: str):
    """A recipe file saved with `files=` (torch.load after the hash check)."""
    require_intact(info, [rel])
    return torch.load(info.directory / rel, map_location="cpu", weights_only=True)


def _tracker_states() -> dict:
    """megatron's CUDA RNG tracker (the per-tensor-parallel-rank generator forked around dropout and
    weight init); on the CPU it is the no-op tracker and holds nothing."""
    from megatron.core import tensor_parallel

    try:
        return {k: v.clone() if torch.is_tensor(v) else v
                for k, v in tensor_parallel.get_cuda_rng_tracker().get_states().items()}
    except AttributeError:  # the no-op tracker may keep no states at all
        return {}


def latest(run_dir: str | Path) -> CheckpointInfo | None:
    """The newest finished checkpoint under `run_dir` (directories `step-NNNNNNN`), or None."""
    found = checkpoints(run_dir)
    return open_checkpoint(found[-1]) if found else None


def checkpoints(run_dir: str | Path) -> list[Path]:
    """Every finished `step-*` checkpoint directory under `run_dir`, oldest step first."""
    return sorted(p for p in Path(run_dir).glob("step-*") if (p / CHECKPOINT_MANIFEST).exists())


def seq_length_of(info: CheckpointInfo) -> int:
    """The sequence length a checkpoint trained at: the data's (pretraining) or the config's (post-training)."""
    length = (info.manifest.get("data") or {}).get("seq_length") or (info.manifest.get("config") or {}).get("seq_length")
    if not length:
        raise ManifestError(f"{info.directory}: the manifest records no sequence length")
    return int(length)


def load_model(checkpoint_dir: str | Path, *, seq_length: int, rotary_base: int | None = None,
               parallel_output: bool = True, kernels: str | None = None):
    """Rebuild a model from a checkpoint's manifest (its shape and RoPE base) and load its weights."""
    from .model import build_model, get_shape

    info = open_checkpoint(checkpoint_dir)
    shape = get_shape(info.manifest["model_shape"]["name"], **{
        k: v for k, v in info.manifest["model_shape"].items() if k != "name"})
    model = build_model(shape, seq_length=seq_length,
                        rotary_base=rotary_base or info.manifest["rotary_base"], parallel_output=parallel_output,
                        kernels=kernels or info.manifest.get("kernels", "local"))
    load_weights(info, model)
    return model, info


# ---- the tokenizer a checkpoint was trained with ------------------------------------------------------------
HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")


def tokenizer_entry(describe: dict, model_file: str | Path | None = None) -> dict:
    """What a checkpoint records of its tokenizer (from a mixture's tokenizer entry or `tok.describe()`).
    A `tokenizer.json` in a Hugging Face tokenizer folder (an import's) also records the folder's files
    (`hf_files`: name -> sha256) and special tokens, so the checkpoint carries them and export-hf writes the
    tokenizer back whole (its chat template, BOS/EOS/pad)."""
    entry = {k: describe.get(k) for k in ("name", "kind", "vocab_size", "eod_id", "pad_id", "model_sha256")}
    folder = Path(model_file).parent if model_file else None
    if folder is not None and Path(model_file).name == "tokenizer.json" and (folder / "tokenizer_config.json").is_file():
        entry["hf_files"] = {n: Location.parse(str(folder / n)).sha256()[0] for n in HF_TOKENIZER_FILES
                             if (folder / n).is_file()}
        config = json.loads((folder / "tokenizer_config.json").read_text())
        entry["special_tokens"] = {k: config[k] for k in ("eos_token", "bos_token", "pad_token", "unk_token")
                                   if isinstance(config.get(k), str)}
    return entry


def same_tokenizer(a: dict | None, b: dict | None) -> bool:
    """Both known and the same ids for the same text: kind, model file hash and end-of-document id."""
    key = lambda t: (t.get("kind"), t.get("model_sha256"), t.get("eod_id"))  # noqa: E731
    return a is not None and b is not None and key(a) == key(b)


def checkpoint_tokenizer(info: CheckpointInfo) -> dict:
    """The tokenizer entry the checkpoint recorded ({name, kind, vocab_size, eod_id, pad_id, model_sha256}),
    with `model_file` = the verified copy inside the checkpoint (None for the byte tokenizer)."""
    entry = info.manifest.get("tokenizer")
    if not entry or not entry.get("kind"):
        raise ConfigError(f"{info.directory}: the checkpoint records no tokenizer (trained on a hand-made "
                          "blend); its ids cannot be turned into text")
    entry = dict(entry, model_file=None)
    if entry.get("file"):
        require_intact(info, [entry["file"]] + [f"tokenizer/{n}" for n in entry.get("hf_files") or {}
                                                if f"tokenizer/{n}" != entry["file"]])
        entry["model_file"] = str(info.directory / entry["file"])
    elif entry["kind"] != "bytes":
        raise ManifestError(f"{info.directory}: tokenizer {entry.get('name')} ({entry['kind']}) has no file in "
                            "the checkpoint")
    return entry


def load_checkpoint_tokenizer(info: CheckpointInfo):
    """The checkpoint's tokenizer as an encode/decode object (training.chat.load_tokenizer). A post-training
    checkpoint records the chat format it was trained in (`template`); one its tokenizer no longer selects
    (training.chat.chat_format) is refused rather than prompted in a format it never saw."""
    from .chat import chat_format, load_tokenizer

    entry = checkpoint_tokenizer(info)
    tok = load_tokenizer("bytes" if entry["kind"] == "bytes" else entry["model_file"])
    recorded = info.manifest.get("template")
    if isinstance(recorded, str) and recorded != chat_format(tok).name:
        raise ConfigError(f"{info.directory}: trained in the chat format {recorded!r}, but its tokenizer selects "
                          f"{chat_format(tok).name!r} (training.chat.chat_format); it predates the chat-format "
                          "change: post-train it again from its base")
    return tok
