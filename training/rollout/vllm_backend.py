"""Rollouts on GPU with vLLM over the Hugging Face export (training/export_hf.py), weights refreshed after
every policy update.

Two parts:
- `WeightSync` (no vLLM needed; tested on CPU): turns a policy checkpoint into an HF folder
  `<work_dir>/v<NNNN>-<checkpoint id>/`, written under a temporary name and renamed when complete, then
  points `<work_dir>/current.json` at it (atomic replace). A checkpoint already published is not exported
  again; only the newest `keep` versions stay on disk. The checkpoint id hashes the checkpoint's manifest
  and weight files' sizes and mtimes, so a rewritten checkpoint at the same path is a new version.
- `VLLMRollouts` (GPU; vLLM is imported lazily and its absence is a clear error): one engine started on the
  first published folder; `refresh(checkpoint)` publishes the new weights and loads them into the running
  engine (`LLM.apply_model(model.load_weights)`), then drops vLLM's prefix cache, which holds KV entries
  computed with the old weights (`refresh_from_model(model, shape)` does the same from the live policy
  without files). `generate` has the megatron generator's signature and returns the same
  `Rollout`s: per-request seeds `rollout_seed(seed, i)`, `logprobs` are vLLM's raw log-probs of the sampled
  tokens (V1 default `logprobs_mode="raw_logprobs"`: before temperature / top-p, the quantity RL needs);
  `sampling_logprobs` are not reported by vLLM and are left empty.

Untested here: vLLM needs CUDA and its own torch build (requirements/gpu.txt); the CPU machines this was
written on have neither. `benchmarks/rollout_throughput.py` runs it when both are present.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..config import ConfigError
from .megatron_generator import GenerateConfig, Rollout, rollout_seed


def checkpoint_id(checkpoint: str | Path) -> str:
    """12 hex digits of the checkpoint's weights id (training/checkpoint.py `weights_id`: their hashes)."""
    from ..checkpoint import open_checkpoint, weights_id

    return weights_id(open_checkpoint(checkpoint))[:12]


def export_policy(checkpoint: str | Path, out: Path, *, max_position_embeddings: int = 4096) -> Path:
    """export_hf for a policy checkpoint (its tokenizer is the one the checkpoint recorded and carries)."""
    from ..export_hf import export_hf

    return export_hf(checkpoint, out, max_position_embeddings=max_position_embeddings)


class WeightSync:
    """Versioned HF folders for a policy that changes every iteration (see the module docstring)."""

    def __init__(self, work_dir: str | Path, *, keep: int = 2, export=export_policy):
        if keep < 1:
            raise ConfigError(f"keep must be >= 1; got {keep} in WeightSync")
        self.work_dir, self.keep, self._export = Path(work_dir), keep, export
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.exports = 0  # folders actually written by this object

    def current(self) -> dict | None:
        path = self.work_dir / "current.json"
        return json.loads(path.read_text()) if path.exists() else None

    def versions(self) -> list[Path]:
        return sorted(p for p in self.work_dir.glob("v[0-9][0-9][0-9][0-9]-*") if p.is_dir())

    def publish(self, checkpoint: str | Path) -> tuple[Path, bool]:
        """(folder, changed): the HF folder of `checkpoint`, exported unless already current."""
        cid = checkpoint_id(checkpoint)
        cur = self.current()
        if cur and cur["checkpoint_id"] == cid and (self.work_dir / cur["folder"]).is_dir():
            return self.work_dir / cur["folder"], False
        n = (cur["version"] + 1) if cur else 1
        name = f"v{n:04d}-{cid}"
        tmp = self.work_dir / f".{name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            self._export(checkpoint, tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)  # the current version stays as it was
            raise
        final = self.work_dir / name
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        body = {"version": n, "folder": name, "checkpoint": str(Path(checkpoint).resolve()), "checkpoint_id": cid}
        tmp_ptr = self.work_dir / "current.json.tmp"
        tmp_ptr.write_text(json.dumps(body, indent=2))
        os.replace(tmp_ptr, self.work_dir / "current.json")
        self.exports += 1
        for old in self.versions()[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        return final, True


def _load_weights_file(model, path: str) -> None:  # pragma: no cover - runs inside a vLLM worker
    from safetensors.torch import load_file

    model.load_weights(load_file(path).items())


class VLLMRollouts:  # pragma: no cover - GPU only
    """vLLM engine over the published HF folder of the current policy."""

    name = "vllm"

    def __init__(self, checkpoint: str | Path, *, work_dir: str | Path, max_model_len: int = 4096,
                 gpu_memory_utilization: float = 0.4, keep: int = 2):
        try:
            from vllm import LLM
        except ImportError:
            raise ConfigError("the vLLM rollout backend needs the vllm package (GPU machines: `pip install vllm`, "
                              "see requirements/gpu.txt)") from None
        self.sync = WeightSync(work_dir, keep=keep)
        folder, _ = self.sync.publish(checkpoint)
        self.llm = LLM(model=str(folder), max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
                       dtype="bfloat16", enable_prefix_caching=True, seed=0)
        self.refreshes = 0

    def refresh(self, checkpoint: str | Path) -> bool:
        """Load the checkpoint's weights into the running engine; False when they are already loaded."""
        folder, changed = self.sync.publish(checkpoint)
        if not changed:
            return False
        path = str(folder / "model.safetensors")
        # the function travels to the engine's worker processes: it carries only the path, and each worker
        # reads the file itself (no tensors through vLLM's RPC, which is meant for control messages)
        self.llm.apply_model(lambda model: _load_weights_file(model, path))
        self.llm.reset_prefix_cache()
        self.refreshes += 1
        return True

    def refresh_from_model(self, model, model_shape: dict) -> None:
        """In-memory refresh (no files): the live megatron policy's weights (TP=1 or gathered) converted to the
        HF layout by training/export_hf.convert_state and loaded into the engine. The tensors cross vLLM's
        RPC, so this is for an engine in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0; newer vLLM also
        needs VLLM_ALLOW_INSECURE_SERIALIZATION=1 to send a function); `refresh(checkpoint)` is the general
        path."""
        from ..export_hf import convert_state

        state = {k: v.detach() for k, v in model.state_dict().items() if hasattr(v, "detach")}
        weights = convert_state(state, dict(model_shape))
        self.llm.apply_model(lambda m: m.load_weights(weights.items()))
        self.llm.reset_prefix_cache()
        self.refreshes += 1

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, stop: list[list[int]] | None = None, seed: int = 0,
                 eos_id: int | None = None, **_unused) -> list[Rollout]:
        from vllm import SamplingParams, TokensPrompt

        GenerateConfig(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=seed)
        stops = [list(s) for s in (stop or [])]
        single = [s[0] for s in stops if len(s) == 1] + ([eos_id] if eos_id is not None else [])
        params = [SamplingParams(max_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                                 seed=rollout_seed(seed, i), logprobs=0, stop_token_ids=single or None,
                                 ignore_eos=eos_id is None, detokenize=False) for i in range(len(prompts))]
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params, use_tqdm=False)
        rollouts = []
        for i, (p, o) in enumerate(zip(prompts, outs)):
            c = o.outputs[0]
            ids = list(c.token_ids)
            lps = [entry[tok].logprob for tok, entry in zip(ids, c.logprobs or [])]
            reason, stop_len = "length", 0
            for t in range(1, len(ids) + 1):  # multi-token stops are cut here (vLLM stops on single ids)
                if eos_id is not None and ids[t - 1] == eos_id:
                    reason, stop_len = "eos", 1
                else:
                    hit = next((s for s in stops if ids[:t][-len(s):] == s), None)
                    if hit is None:
                        continue
                    reason, stop_len = "stop", len(hit)
                ids, lps = ids[:t], lps[:t]
                break
            rollouts.append(Rollout(index=i, prompt_ids=list(p), response_ids=ids, logprobs=lps,
                                    sampling_logprobs=[], finish_reason=reason, stop_len=stop_len,
                                    meta={"backend": "vllm", "policy_version": self.sync.current()["version"]}))
        return rollouts
